//! The [`Dataset`]: opening and replaying, the write path (eager or lazy
//! maintenance, one log record per write, checkpoints at the shared
//! budget) and the queries.

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use lamina::compaction::CompactionSpec;
use lamina::log::{append_record, read_records};
use lamina::spatial::{Point, Rect};
use lamina::vfs::DirLock;
use lamina::{Db, Error, Result, SyncMode};

use crate::descriptor::{
    write_descriptor, Descriptor, DESCRIPTOR, FIELD_DIR_PREFIX, INDEX_DIR, LOCK, PRIMARY_DIR,
};
use crate::keys::{escaped, field_key, parse_field_key, primary_key};
use crate::log::{
    apply, field_index, log_name, parse_log_name, Ops, Writer, DELETE, FIRST_FIELD, PRIMARY, PUT,
    SECONDARY,
};
use crate::options::{valid_field_name, DatasetOptions, Maintenance, MAX_FIELD_NAME};
use crate::record::{decode_record, encode_record, Record};

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

/// Records with a primary and a spatial secondary index (see the crate
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
    #[expect(
        clippy::too_many_lines,
        reason = "predates the lint; one long sequence of steps, to be cut like `plan`"
    )]
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

/// Bitwise equality: what the spatial key encodes.
fn same_point(a: Point, b: Point) -> bool {
    a.x.to_bits() == b.x.to_bits() && a.y.to_bits() == b.y.to_bits()
}
