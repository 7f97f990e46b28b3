//! A dataset of point records with a primary index, a spatial secondary
//! index and secondary indexes on fields, kept consistent as AsterixDB
//! keeps them (seed 000 §4.3.1).
//!
//! * The **primary index** maps a record's id to its point, fields and
//!   payload; the **spatial index** is an LSM R-tree
//!   ([`lamina::Options::spatial`]) keyed by the composite ⟨point, id⟩ in a
//!   [`Comparator`]'s order; a **field index** ([`FieldIndex`]) is keyed by
//!   the composite ⟨field value, id⟩ in byte order. Each is its own [`Db`]
//!   with its own compaction policy.
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

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use lamina::compaction::CompactionSpec;
use lamina::log::{append_record, get_bytes, get_varint, put_bytes, put_varint, read_records};
use lamina::spatial::{Comparator, Point, Rect};
use lamina::vfs::{DirLock, WritableFile};
use lamina::{Db, Error, Options, Result, SyncMode, WriteBatch};

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

/// A secondary index on one field of the records: [`Record::fields`]`[i]`
/// is the value of the dataset's `i`-th field index.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldIndex {
    /// 1 to 32 characters of `a-z`, `0-9` and `_`; the index lives in
    /// directory `field-NAME`.
    pub name: String,
    /// The index's merge policy.
    pub compaction: CompactionSpec,
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
    /// Secondary indexes on fields, in the order of [`Record::fields`];
    /// fixed when the dataset is created.
    pub fields: Vec<FieldIndex>,
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
            fields: Vec::new(),
        }
    }
}

/// A record: an id, a point, indexed fields and an opaque payload.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// Primary key.
    pub id: u64,
    /// The location the spatial index holds.
    pub point: Point,
    /// One value per field index of the dataset, in
    /// [`DatasetOptions::fields`]' order.
    pub fields: Vec<Vec<u8>>,
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
    /// Anti-matter entries written into the secondary indexes (eager only).
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
const FIELD_DIR_PREFIX: &str = "field-";
/// The descriptor of a dataset without field indexes (readable by the
/// versions before field indexes).
const FORMAT_LINE: &str = "lamina-dataset 1";
/// The descriptor of a dataset with field indexes: version 1 plus a
/// `fields` line.
const FORMAT_LINE_FIELDS: &str = "lamina-dataset 2";
const MAX_FIELD_NAME: usize = 32;

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
#[derive(Debug, Clone, PartialEq, Eq)]
struct Descriptor {
    comparator: Comparator,
    maintenance: Maintenance,
    /// Logs numbered below this are no longer needed.
    checkpoint: u64,
    /// The field indexes' names, in order.
    fields: Vec<String>,
}

impl Descriptor {
    fn encode(&self) -> String {
        let head = format!(
            "comparator {}\nmaintenance {}\ncheckpoint {}\n",
            self.comparator.name(),
            self.maintenance.name(),
            self.checkpoint
        );
        if self.fields.is_empty() {
            format!("{FORMAT_LINE}\n{head}")
        } else {
            format!(
                "{FORMAT_LINE_FIELDS}\n{head}fields {}\n",
                self.fields.join(" ")
            )
        }
    }

    fn decode(text: &str) -> Option<Descriptor> {
        let mut lines = text.lines();
        let with_fields = match lines.next()? {
            FORMAT_LINE => false,
            FORMAT_LINE_FIELDS => true,
            _ => return None,
        };
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
        let fields = if with_fields {
            let names: Vec<String> = field("fields")?.split(' ').map(str::to_string).collect();
            if names.iter().any(|n| !valid_field_name(n)) {
                return None;
            }
            names
        } else {
            Vec::new()
        };
        if lines.next().is_some() {
            return None;
        }
        Some(Descriptor {
            comparator,
            maintenance,
            checkpoint,
            fields,
        })
    }
}

fn valid_field_name(name: &str) -> bool {
    (1..=MAX_FIELD_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// The key of ⟨`value`, `id`⟩ in a field index: the value with each 0x00
/// written as 0x00 0xFF, then 0x00 0x01, then the id (8 bytes, big-endian).
/// Byte order of these keys is the order of (value, id): the terminator
/// sorts below any continuation of the value.
fn field_key(value: &[u8], id: u64) -> Vec<u8> {
    let mut k = escaped(value);
    k.extend_from_slice(&[0x00, 0x01]);
    k.extend_from_slice(&id.to_be_bytes());
    k
}

/// `value` with each 0x00 written as 0x00 0xFF: a field key of a value `v`
/// sorts at or above `escaped(lo)` exactly when `v >= lo`.
fn escaped(value: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(value.len() + 10);
    for &b in value {
        k.push(b);
        if b == 0 {
            k.push(0xFF);
        }
    }
    k
}

/// Inverse of [`field_key`].
fn parse_field_key(key: &[u8]) -> Option<(Vec<u8>, u64)> {
    let mut value = Vec::new();
    let mut i = 0;
    loop {
        match *key.get(i)? {
            0 => match *key.get(i + 1)? {
                0xFF => value.push(0),
                0x01 => break,
                _ => return None,
            },
            b => {
                value.push(b);
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    let id: [u8; 8] = key.get(i + 2..)?.try_into().ok()?;
    Some((value, u64::from_be_bytes(id)))
}

/// Which index an operation of a log record goes to: the primary, the
/// spatial index, or field index `i` as `FIRST_FIELD + i`.
const PRIMARY: u8 = 0;
const SECONDARY: u8 = 1;
const FIRST_FIELD: u8 = 2;
const PUT: u8 = 0;
const DELETE: u8 = 1;

/// One write's operations on every index, as logged and as applied.
struct Ops {
    log: Vec<u8>,
    count: u64,
    /// The primary's batch, the spatial index's, then one per field index.
    batches: Vec<WriteBatch>,
}

impl Ops {
    fn new(fields: usize) -> Ops {
        Ops {
            log: Vec::new(),
            count: 0,
            batches: (0..usize::from(FIRST_FIELD) + fields)
                .map(|_| WriteBatch::default())
                .collect(),
        }
    }

    /// Adds an operation; `index` is below `FIRST_FIELD` plus the number
    /// of field indexes (callers and [`Ops::decode`] check).
    fn add(&mut self, index: u8, kind: u8, key: &[u8], value: &[u8]) {
        self.log.push(index);
        self.log.push(kind);
        put_bytes(&mut self.log, key);
        put_bytes(&mut self.log, value);
        self.count += 1;
        let Some(batch) = self.batches.get_mut(usize::from(index)) else {
            return;
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

    fn decode(mut rec: &[u8], fields: usize) -> Option<Ops> {
        let count = get_varint(&mut rec)?;
        let mut ops = Ops::new(fields);
        for _ in 0..count {
            let (&index, rest) = rec.split_first()?;
            let (&kind, rest) = rest.split_first()?;
            rec = rest;
            if usize::from(index) >= ops.batches.len() || kind > DELETE {
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

/// The primary index's value: x and y (f64 little-endian), each field
/// (varint length, bytes; as many as the dataset has field indexes, so a
/// dataset without them stores exactly x, y, payload), then the payload.
fn encode_record(record: &Record) -> Vec<u8> {
    let fields: usize = record.fields.iter().map(|f| f.len() + 5).sum();
    let mut v = Vec::with_capacity(16 + fields + record.payload.len());
    v.extend_from_slice(&record.point.x.to_le_bytes());
    v.extend_from_slice(&record.point.y.to_le_bytes());
    for f in &record.fields {
        put_bytes(&mut v, f);
    }
    v.extend_from_slice(&record.payload);
    v
}

fn decode_record(id: u64, value: &[u8], fields: usize) -> Option<Record> {
    let x = f64::from_le_bytes(value.get(..8)?.try_into().ok()?);
    let y = f64::from_le_bytes(value.get(8..16)?.try_into().ok()?);
    let mut rest = value.get(16..)?;
    let fields = (0..fields)
        .map(|_| get_bytes(&mut rest).map(<[u8]>::to_vec))
        .collect::<Option<Vec<_>>>()?;
    Some(Record {
        id,
        point: Point::new(x, y),
        fields,
        payload: rest.to_vec(),
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
    /// The field indexes, in `opts.fields`' order.
    fields: Vec<Db>,
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
    /// a dataset, or a dataset created with another comparator, maintenance
    /// strategy or field indexes, is refused and left untouched.
    pub fn open(dir: impl AsRef<Path>, opts: DatasetOptions) -> Result<Dataset> {
        let dir = dir.as_ref().to_path_buf();
        let vfs = std::sync::Arc::clone(&opts.base.vfs);
        if opts.base.read_only {
            return Err(Error::InvalidArgument(
                "a dataset cannot be opened read-only yet".into(),
            ));
        }
        let names: Vec<String> = opts.fields.iter().map(|f| f.name.clone()).collect();
        if let Some(bad) = names.iter().find(|n| !valid_field_name(n)) {
            return Err(Error::InvalidArgument(format!(
                "field index name {bad:?}: use 1 to {MAX_FIELD_NAME} characters of a-z, 0-9 and _"
            )));
        }
        if let Some(dup) = names
            .iter()
            .enumerate()
            .find(|(i, n)| names[..*i].contains(n))
        {
            return Err(Error::InvalidArgument(format!(
                "field index {:?} is named twice",
                dup.1
            )));
        }
        if names.len() > usize::from(u8::MAX - FIRST_FIELD) {
            return Err(Error::InvalidArgument(format!(
                "{} field indexes; at most {} fit a dataset",
                names.len(),
                u8::MAX - FIRST_FIELD
            )));
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
            if d.comparator != opts.comparator
                || d.maintenance != opts.maintenance
                || d.fields != names
            {
                return Err(Error::InvalidArgument(format!(
                    "{} was created with comparator {}, {} maintenance and field indexes [{}]; open it with those",
                    dir.display(),
                    d.comparator.name(),
                    d.maintenance.name(),
                    d.fields.join(", ")
                )));
            }
            d
        } else {
            let d = Descriptor {
                comparator: opts.comparator,
                maintenance: opts.maintenance,
                checkpoint: 1,
                fields: names,
            };
            write_descriptor(&opts.base, &dir, &d)?;
            d
        };
        let index_options = |compaction: &CompactionSpec, spatial| {
            let mut o = opts.base.clone();
            o.compaction = compaction.clone();
            o.write_buffer_size = opts.memory_budget.max(1);
            o.write_ahead_log = false;
            // Each index's flush is its share of the budget.
            o.plan_with_mean_flush = true;
            o.spatial = spatial;
            o
        };
        let primary = Db::open(
            dir.join(PRIMARY_DIR),
            index_options(&opts.primary_compaction, None),
        )?;
        let index = Db::open(
            dir.join(INDEX_DIR),
            index_options(&opts.index_compaction, Some(opts.comparator)),
        )?;
        let fields = opts
            .fields
            .iter()
            .map(|f| {
                Db::open(
                    dir.join(format!("{FIELD_DIR_PREFIX}{}", f.name)),
                    index_options(&f.compaction, None),
                )
            })
            .collect::<Result<Vec<Db>>>()?;

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
                let ops = Ops::decode(rec, fields.len())
                    .ok_or_else(|| Error::corruption(name.as_str(), offset, "malformed record"))?;
                apply(&primary, &index, &fields, ops)
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
            fields,
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

    /// Inserts `record`, or replaces the record with its id (moving it,
    /// changing its fields). `record.fields` holds one value per field
    /// index.
    pub fn upsert(&self, record: &Record) -> Result<()> {
        if record.fields.len() != self.fields.len() {
            return Err(Error::InvalidArgument(format!(
                "record {} has {} field values; the dataset has {} field indexes",
                record.id,
                record.fields.len(),
                self.fields.len()
            )));
        }
        let new_key = self.opts.comparator.encode(record.point, record.id)?;
        let mut writer = self.writer.lock();
        let mut ops = Ops::new(self.fields.len());
        if self.opts.maintenance == Maintenance::Eager {
            self.counters.write_lookups.fetch_add(1, Ordering::Relaxed);
            if let Some(old) = self.get(record.id)? {
                if !same_point(old.point, record.point) {
                    self.add_antimatter(&mut ops, SECONDARY, &old)?;
                }
                for (i, (was, is)) in old.fields.iter().zip(&record.fields).enumerate() {
                    if was != is {
                        self.add_antimatter(&mut ops, field_index(i), &old)?;
                    }
                }
            }
        }
        ops.add(
            PRIMARY,
            PUT,
            &primary_key(record.id),
            &encode_record(record),
        );
        ops.add(SECONDARY, PUT, &new_key, &[]);
        for (i, value) in record.fields.iter().enumerate() {
            ops.add(field_index(i), PUT, &field_key(value, record.id), &[]);
        }
        self.commit(&mut writer, ops)
    }

    /// Deletes the record with id `id`; returns whether it existed (lazy
    /// maintenance does not look, and returns `true`).
    pub fn delete(&self, id: u64) -> Result<bool> {
        let mut writer = self.writer.lock();
        let mut ops = Ops::new(self.fields.len());
        let existed = match self.opts.maintenance {
            Maintenance::Eager => {
                self.counters.write_lookups.fetch_add(1, Ordering::Relaxed);
                match self.get(id)? {
                    Some(old) => {
                        self.add_antimatter(&mut ops, SECONDARY, &old)?;
                        for i in 0..self.fields.len() {
                            self.add_antimatter(&mut ops, field_index(i), &old)?;
                        }
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

    /// Adds anti-matter for `old`'s entry in secondary index `index`.
    fn add_antimatter(&self, ops: &mut Ops, index: u8, old: &Record) -> Result<()> {
        let key = if index == SECONDARY {
            self.opts.comparator.encode(old.point, old.id)?
        } else {
            let value = old
                .fields
                .get(usize::from(index - FIRST_FIELD))
                .ok_or_else(|| Error::corruption(PRIMARY_DIR, 0, "record without its fields"))?;
            field_key(value, old.id)
        };
        ops.add(index, DELETE, &key, &[]);
        self.counters.antimatter.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// The record with id `id`.
    pub fn get(&self, id: u64) -> Result<Option<Record>> {
        match self.primary.get(&primary_key(id))? {
            Some(v) => decode_record(id, &v, self.fields.len())
                .map(Some)
                .ok_or_else(|| Error::corruption(PRIMARY_DIR, 0, "malformed record value")),
            None => Ok(None),
        }
    }

    /// Ids of the records whose point lies in the closed rectangle `window`.
    pub fn window(&self, window: Rect) -> Result<WindowAnswer> {
        let mut ids = Vec::new();
        let components = self.scan_window(window, |id| {
            ids.push(id);
            true
        })?;
        ids.sort_unstable();
        Ok(WindowAnswer { ids, components })
    }

    /// As [`Dataset::window`], but `None` as soon as more than `max_ids`
    /// records match: a server bounds a reply's memory with it.
    pub fn window_at_most(&self, window: Rect, max_ids: usize) -> Result<Option<WindowAnswer>> {
        let mut ids = Vec::new();
        let mut over = false;
        let components = self.scan_window(window, |id| {
            over = ids.len() == max_ids;
            if !over {
                ids.push(id);
            }
            !over
        })?;
        if over {
            return Ok(None);
        }
        ids.sort_unstable();
        Ok(Some(WindowAnswer { ids, components }))
    }

    /// How many records lie in `window`, without collecting their ids;
    /// with the components scanned.
    pub fn count(&self, window: Rect) -> Result<(u64, u64)> {
        let mut n = 0u64;
        let components = self.scan_window(window, |_| {
            n += 1;
            true
        })?;
        Ok((n, components))
    }

    /// Calls `found` with each record id in `window` (validated against the
    /// primary index under lazy maintenance) until it returns false;
    /// returns the components read.
    fn scan_window(&self, window: Rect, mut found: impl FnMut(u64) -> bool) -> Result<u64> {
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
                let valid = current.is_some_and(|r| same_point(r.point, point));
                if !valid {
                    self.counters
                        .stale_candidates
                        .fetch_add(1, Ordering::Relaxed);
                    continue;
                }
            }
            if !found(id) {
                break;
            }
        }
        Ok(components)
    }

    /// Ids of the records whose field `field` equals `value`, ascending.
    pub fn lookup(&self, field: &str, value: &[u8]) -> Result<Vec<u64>> {
        let mut end = escaped(value);
        let start = [end.as_slice(), &[0x00, 0x01]].concat();
        end.extend_from_slice(&[0x00, 0x02]);
        let mut ids = Vec::new();
        self.scan_field(field, start, Some(end), |_, id| {
            ids.push(id);
            true
        })?;
        Ok(ids)
    }

    /// The ⟨value, id⟩ pairs of field `field` with `from <= value < to`
    /// (`to` `None`: no upper bound), in value then id order; at most
    /// `limit` of them.
    pub fn field_range(
        &self,
        field: &str,
        from: &[u8],
        to: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, u64)>> {
        let mut out = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        self.scan_field(field, escaped(from), to.map(escaped), |value, id| {
            out.push((value, id));
            out.len() < limit
        })?;
        Ok(out)
    }

    /// Calls `found` with each ⟨value, id⟩ of field index `field` whose key
    /// lies in `[start, end)` (`end` `None`: no bound), validated against
    /// the primary index under lazy maintenance, until it returns false.
    fn scan_field(
        &self,
        field: &str,
        start: Vec<u8>,
        end: Option<Vec<u8>>,
        mut found: impl FnMut(Vec<u8>, u64) -> bool,
    ) -> Result<()> {
        let i = self.field_position(field)?;
        let upper = match &end {
            Some(end) if *end <= start => return Ok(()),
            Some(end) => Bound::Excluded(end.as_slice()),
            None => Bound::Unbounded,
        };
        for item in self.fields[i].scan(Bound::Included(start.as_slice()), upper)? {
            let (key, _) = item?;
            let (value, id) = parse_field_key(&key)
                .ok_or_else(|| Error::corruption(FIELD_DIR_PREFIX, 0, "malformed field key"))?;
            if self.opts.maintenance == Maintenance::Lazy {
                self.counters.validations.fetch_add(1, Ordering::Relaxed);
                let current = self.get(id)?;
                if current.is_none_or(|r| r.fields.get(i) != Some(&value)) {
                    self.counters
                        .stale_candidates
                        .fetch_add(1, Ordering::Relaxed);
                    continue;
                }
            }
            if !found(value, id) {
                break;
            }
        }
        Ok(())
    }

    fn field_position(&self, field: &str) -> Result<usize> {
        self.opts
            .fields
            .iter()
            .position(|f| f.name == field)
            .ok_or_else(|| Error::InvalidArgument(format!("no field index named {field:?}")))
    }

    /// Flushes every index's memtable together and restarts the log.
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

    /// The field index named `field` (its statistics, compaction settings).
    pub fn field_index(&self, field: &str) -> Option<&Db> {
        self.field_position(field).ok().map(|i| &self.fields[i])
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

    /// Flushes everything and closes every index.
    pub fn close(self) -> Result<()> {
        let mut result = self.flush();
        for db in [self.primary, self.index].into_iter().chain(self.fields) {
            result = result.and(db.close());
        }
        result
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
        if let Err(e) = apply(&self.primary, &self.index, &self.fields, ops) {
            writer.broken = true;
            return Err(e);
        }
        self.counters.writes.fetch_add(1, Ordering::Relaxed);
        // An index must never flush on its own: its table would hold writes
        // whose log record may not be durable yet. Each index switches
        // memtables at the budget, checked before its next write, so
        // flushing all of them as soon as their sum reaches it keeps every
        // flush here, behind a synced log.
        let held = self.primary.active_memtable_bytes()
            + self.index.active_memtable_bytes()
            + self
                .fields
                .iter()
                .map(Db::active_memtable_bytes)
                .sum::<usize>();
        if held >= self.opts.memory_budget {
            self.checkpoint(writer)?;
        }
        Ok(())
    }

    /// Flushes every index, starts log `number + 1`, records it as the
    /// checkpoint and deletes the logs before it (all of them created by
    /// this dataset: only names of its log pattern are touched).
    fn checkpoint(&self, writer: &mut Writer) -> Result<()> {
        // The tables about to be written must not hold a write the log
        // could still lose.
        writer.log.sync()?;
        self.primary.flush()?;
        self.index.flush()?;
        for db in &self.fields {
            db.flush()?;
        }
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
                fields: self.opts.fields.iter().map(|f| f.name.clone()).collect(),
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

/// Applies one logged write to every index, the secondary ones first.
fn apply(primary: &Db, index: &Db, fields: &[Db], ops: Ops) -> Result<()> {
    let mut batches = ops.batches.into_iter();
    let primary_batch = batches.next().unwrap_or_default();
    for (db, batch) in std::iter::once(index).chain(fields).zip(batches) {
        if !batch.is_empty() {
            db.write(batch)?;
        }
    }
    if !primary_batch.is_empty() {
        primary.write(primary_batch)?;
    }
    Ok(())
}

/// The log's index byte of field index `i` (`open` bounds the count).
fn field_index(i: usize) -> u8 {
    FIRST_FIELD.saturating_add(u8::try_from(i).unwrap_or(u8::MAX))
}

/// Bitwise equality: what the spatial key encodes.
fn same_point(a: Point, b: Point) -> bool {
    a.x.to_bits() == b.x.to_bits() && a.y.to_bits() == b.y.to_bits()
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
    use proptest::prelude::{any, Just};

    #[test]
    fn descriptor_and_log_names_roundtrip() {
        let d = Descriptor {
            comparator: Comparator::Simple,
            maintenance: Maintenance::Lazy,
            checkpoint: 42,
            fields: Vec::new(),
        };
        assert_eq!(Descriptor::decode(&d.encode()), Some(d.clone()));
        assert_eq!(
            d.encode(),
            "lamina-dataset 1\ncomparator simple\nmaintenance lazy\ncheckpoint 42\n"
        );
        let with_fields = Descriptor {
            fields: vec!["city".into(), "kind_2".into()],
            ..d
        };
        assert_eq!(
            with_fields.encode(),
            "lamina-dataset 2\ncomparator simple\nmaintenance lazy\ncheckpoint 42\nfields city kind_2\n"
        );
        assert_eq!(Descriptor::decode(&with_fields.encode()), Some(with_fields));
        for bad in [
            "lamina-dataset 2\n",
            "lamina-dataset 2\ncomparator simple\nmaintenance lazy\ncheckpoint 42\n",
            "lamina-dataset 2\ncomparator simple\nmaintenance lazy\ncheckpoint 42\nfields Bad\n",
            "lamina-dataset 1\ncomparator simple\nmaintenance lazy\ncheckpoint 42\nfields a\n",
            "lamina-dataset 3\n",
        ] {
            assert!(Descriptor::decode(bad).is_none(), "{bad}");
        }
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
        let mut ops = Ops::new(0);
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
        let back = Ops::decode(&rec, 0).unwrap();
        assert_eq!(back.record(), rec);
        let sizes: Vec<usize> = back.batches.iter().map(WriteBatch::len).collect();
        assert_eq!(sizes, [1, 1]);
        assert!(Ops::decode(&rec[..rec.len() - 1], 0).is_none());
        let mut bad = rec.clone();
        bad[1] = 2;
        // Index 2 is a field index: unknown to a dataset without one.
        assert!(Ops::decode(&bad, 0).is_none());
        let sizes: Vec<usize> = Ops::decode(&bad, 1)
            .unwrap()
            .batches
            .iter()
            .map(WriteBatch::len)
            .collect();
        assert_eq!(sizes, [1, 0, 1]);
        assert!(Ops::decode(&[rec.as_slice(), &[0]].concat(), 0).is_none());
    }

    #[test]
    fn records_roundtrip_and_keep_the_fieldless_layout() {
        let r = Record {
            id: 9,
            point: Point::new(1.5, -2.0),
            fields: Vec::new(),
            payload: b"pay".to_vec(),
        };
        let v = encode_record(&r);
        assert_eq!(
            v,
            [&1.5f64.to_le_bytes()[..], &(-2.0f64).to_le_bytes(), b"pay"].concat()
        );
        assert_eq!(decode_record(9, &v, 0), Some(r.clone()));
        let r = Record {
            fields: vec![b"a\0b".to_vec(), Vec::new()],
            ..r
        };
        let v = encode_record(&r);
        assert_eq!(decode_record(9, &v, 2), Some(r));
        assert_eq!(decode_record(9, &v[..17], 2), None);
    }

    proptest::proptest! {
        /// Field keys sort as (value, id) and decode back.
        #[test]
        fn field_keys_sort_as_value_then_id(
            a in proptest::collection::vec(proptest::prop_oneof![Just(0u8), Just(1), Just(0xFF), any::<u8>()], 0..6),
            b in proptest::collection::vec(proptest::prop_oneof![Just(0u8), Just(1), Just(0xFF), any::<u8>()], 0..6),
            ia in any::<u64>(),
            ib in any::<u64>(),
        ) {
            let (ka, kb) = (field_key(&a, ia), field_key(&b, ib));
            proptest::prop_assert_eq!(ka.cmp(&kb), (&a, ia).cmp(&(&b, ib)));
            proptest::prop_assert_eq!(parse_field_key(&ka), Some((a.clone(), ia)));
            // The scan bounds of field_range: escaped(lo) <= key < escaped(hi)
            // exactly when lo <= value < hi.
            proptest::prop_assert_eq!(ka >= escaped(&b), a >= b);
            proptest::prop_assert_eq!(ka < escaped(&b), a < b);
        }
    }
}
