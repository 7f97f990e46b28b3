//! `lamina.open`, `Db`, `WriteBatch` and `Snapshot`.

use std::path::PathBuf;
use std::sync::Arc;

use lamina::{Db, Options, WriteBatch};
use parking_lot::Mutex;
use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::convert::to_py;
use crate::errors::{engine, invalid};
use crate::iter::{PyIterator, Spec};
use crate::shared::Shared;

/// Keyword arguments of `open`, as `lamina::Options` fields.
const OPTION_NAMES: &[&str] = &[
    "create_if_missing",
    "read_only",
    "write_buffer_size",
    "max_immutable_memtables",
    "block_size",
    "bloom_bits_per_key",
    "bloom_bits_per_level",
    "bloom_monkey",
    "memtable_bloom_bits_per_key",
    "block_cache_bytes",
    "compression",
    "compression_per_level",
    "row_cache_bytes",
    "size_ratio",
    "target_file_size",
    "compaction",
    "compaction_threads",
    "compaction_fills_cache",
    "compaction_warm_up",
    "compaction_readahead_bytes",
    "scan_threads",
    "level0_stop_runs",
    "writes_wait_for_compactions",
    "sync",
    "write_ahead_log",
    "mmap_reads",
    "scan_resistant_cache",
    "verify_checksums",
    "max_scan_readahead_bytes",
];

/// The value of keyword `name`; a wrong type names the keyword.
fn kwarg<'py, T>(name: &str, v: &Bound<'py, PyAny>) -> PyResult<T>
where
    T: for<'a> FromPyObject<'a, 'py, Error = PyErr>,
{
    v.extract::<T>().map_err(|e| {
        // Out of range (a negative size) stays an OverflowError, as Python's
        // own conversions raise; anything else is the wrong type.
        let msg = format!("{name}: {e}");
        if e.is_instance_of::<PyOverflowError>(v.py()) {
            PyOverflowError::new_err(msg)
        } else {
            PyTypeError::new_err(msg)
        }
    })
}

/// A compression type by name ("none", "lz4", "zstd", "zstd:LEVEL").
fn parse_compression(kind: &str) -> PyResult<lamina::Compression> {
    kind.parse()
        .map_err(|e: String| invalid(format!("compression {kind:?}: {e}")))
}

/// `Options` from `open`'s keyword arguments; the engine checks the
/// combination (`Options::validate`) when it opens.
fn options(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Options> {
    let mut o = Options::default();
    let Some(kwargs) = kwargs else {
        return Ok(o);
    };
    for (k, v) in kwargs.iter() {
        let name: String = k.extract()?;
        let v = &v;
        match name.as_str() {
            "create_if_missing" => o.create_if_missing = kwarg(&name, v)?,
            "read_only" => o.read_only = kwarg(&name, v)?,
            "write_buffer_size" => o.write_buffer_size = kwarg(&name, v)?,
            "max_immutable_memtables" => o.max_immutable_memtables = kwarg(&name, v)?,
            "block_size" => o.block_size = kwarg(&name, v)?,
            "bloom_bits_per_key" => o.bloom_bits_per_key = kwarg(&name, v)?,
            "bloom_bits_per_level" => o.bloom_bits_per_level = kwarg(&name, v)?,
            "bloom_monkey" => o.bloom_monkey = kwarg(&name, v)?,
            "memtable_bloom_bits_per_key" => o.memtable_bloom_bits_per_key = kwarg(&name, v)?,
            "block_cache_bytes" => o.block_cache_bytes = kwarg(&name, v)?,
            "compression" => {
                let kind: String = kwarg(&name, v)?;
                o.compression = parse_compression(&kind)?;
            }
            "compression_per_level" => {
                let kinds: Vec<String> = kwarg(&name, v)?;
                o.compression_per_level = kinds
                    .iter()
                    .map(|k| parse_compression(k))
                    .collect::<PyResult<_>>()?;
            }
            "row_cache_bytes" => o.row_cache_bytes = kwarg(&name, v)?,
            "size_ratio" => o.size_ratio = kwarg(&name, v)?,
            "target_file_size" => o.target_file_size = kwarg(&name, v)?,
            "compaction" => {
                let spec: String = kwarg(&name, v)?;
                o.compaction = spec
                    .parse()
                    .map_err(|e| invalid(format!("compaction {spec:?}: {e}")))?;
            }
            "compaction_threads" => o.compaction_threads = kwarg(&name, v)?,
            "compaction_fills_cache" => o.compaction_fills_cache = kwarg(&name, v)?,
            "compaction_warm_up" => o.compaction_warm_up = kwarg(&name, v)?,
            "compaction_readahead_bytes" => o.compaction_readahead_bytes = kwarg(&name, v)?,
            "scan_threads" => o.scan_threads = kwarg(&name, v)?,
            "level0_stop_runs" => o.level0_stop_runs = kwarg(&name, v)?,
            "writes_wait_for_compactions" => o.writes_wait_for_compactions = kwarg(&name, v)?,
            "sync" => {
                let mode: String = kwarg(&name, v)?;
                o.sync = mode
                    .parse()
                    .map_err(|e: String| invalid(format!("sync {mode:?}: {e}")))?;
            }
            "write_ahead_log" => o.write_ahead_log = kwarg(&name, v)?,
            "mmap_reads" => o.mmap_reads = kwarg(&name, v)?,
            "scan_resistant_cache" => o.scan_resistant_cache = kwarg(&name, v)?,
            "verify_checksums" => o.verify_checksums = kwarg(&name, v)?,
            "max_scan_readahead_bytes" => o.max_scan_readahead_bytes = kwarg(&name, v)?,
            other => {
                return Err(PyTypeError::new_err(format!(
                    "open() got an unexpected keyword argument '{other}' (options: {})",
                    OPTION_NAMES.join(", ")
                )))
            }
        }
    }
    Ok(o)
}

/// Opens (by default creates) the database in directory `path`.
#[pyfunction]
#[pyo3(signature = (path, **options))]
pub fn open(py: Python<'_>, path: PathBuf, options: Option<&Bound<'_, PyDict>>) -> PyResult<PyDb> {
    let opts = self::options(options)?;
    let db = py.detach(|| Db::open(&path, opts)).map_err(engine)?;
    Ok(PyDb {
        shared: Shared::new(db),
        path,
    })
}

/// Values (or None) as a Python list of bytes.
fn values<'py>(py: Python<'py>, values: &[Option<Vec<u8>>]) -> PyResult<Bound<'py, PyList>> {
    PyList::new(
        py,
        values
            .iter()
            .map(|v| v.as_deref().map(|v| PyBytes::new(py, v))),
    )
}

/// The keyword arguments `iterator` takes; `stop` is plyvel's name of `end`.
pub(crate) fn iterator_spec(
    start: Option<Vec<u8>>,
    end: Option<Vec<u8>>,
    stop: Option<Vec<u8>>,
    prefix: Option<Vec<u8>>,
    reverse: bool,
    include_key: bool,
    include_value: bool,
) -> PyResult<Spec> {
    if end.is_some() && stop.is_some() {
        return Err(PyTypeError::new_err(
            "give end or stop (its plyvel name), not both",
        ));
    }
    Ok(Spec {
        start,
        end: end.or(stop),
        prefix,
        reverse,
        include_key,
        include_value,
    })
}

/// An open database (see `lamina.open`).
#[pyclass(module = "lamina", name = "Db", frozen)]
pub struct PyDb {
    shared: Arc<Shared>,
    path: PathBuf,
}

#[pymethods]
impl PyDb {
    /// Stores `key` → `value`.
    fn put(&self, py: Python<'_>, key: &[u8], value: &[u8]) -> PyResult<()> {
        self.shared.with_db(py, |db| db.put(key, value))
    }

    /// The value of `key`, or `default` (None) if it is absent.
    #[pyo3(signature = (key, default=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &[u8],
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let v = self.shared.with_db(py, |db| db.get(key))?;
        Ok(or_default(py, v, default))
    }

    /// The values of `keys` (None for an absent key), in their order.
    fn multi_get<'py>(&self, py: Python<'py>, keys: Vec<Vec<u8>>) -> PyResult<Bound<'py, PyList>> {
        let found = self.shared.with_db(py, |db| db.multi_get(&keys))?;
        values(py, &found)
    }

    /// Deletes `key` (a missing key is no error).
    fn delete(&self, py: Python<'_>, key: &[u8]) -> PyResult<()> {
        self.shared.with_db(py, |db| db.delete(key))
    }

    /// Deletes every key with `start <= key < end` (one range tombstone,
    /// whatever the number of keys; nothing when `start >= end`).
    fn delete_range(&self, py: Python<'_>, start: &[u8], end: &[u8]) -> PyResult<()> {
        self.shared.with_db(py, |db| db.delete_range(start, end))
    }

    /// Applies `batch` atomically; the batch keeps its operations.
    fn write(&self, py: Python<'_>, batch: PyRef<'_, PyWriteBatch>) -> PyResult<()> {
        let batch = batch.batch.clone();
        self.shared.with_db(py, |db| db.write(batch))
    }

    /// The live entries with `start <= key < end` (None: unbounded), in key
    /// order, or descending with `reverse=True`; a lazy iterator of
    /// `(key, value)` over the database as of this call.
    #[pyo3(signature = (start=None, end=None, reverse=false))]
    fn scan(
        &self,
        py: Python<'_>,
        start: Option<Vec<u8>>,
        end: Option<Vec<u8>>,
        reverse: bool,
    ) -> PyResult<PyIterator> {
        PyIterator::open(py, &self.shared, None, &Spec::range(start, end, reverse))
    }

    /// A lazy iterator over the database as of this call (plyvel's
    /// `iterator`): the keys with `start <= key < end` (`stop` is plyvel's
    /// name of `end`) or starting with `prefix`, ascending or with
    /// `reverse=True` descending, yielding `(key, value)`, or only keys
    /// with `include_value=False`, or only values with `include_key=False`.
    /// It can `seek`, `seek_for_prev`, `seek_to_first` and `seek_to_last`.
    #[pyo3(signature = (start=None, end=None, *, stop=None, prefix=None, reverse=false, include_key=true, include_value=true))]
    #[expect(
        clippy::too_many_arguments,
        reason = "a Python keyword-argument method: one argument per option"
    )]
    fn iterator(
        &self,
        py: Python<'_>,
        start: Option<Vec<u8>>,
        end: Option<Vec<u8>>,
        stop: Option<Vec<u8>>,
        prefix: Option<Vec<u8>>,
        reverse: bool,
        include_key: bool,
        include_value: bool,
    ) -> PyResult<PyIterator> {
        let spec = iterator_spec(
            start,
            end,
            stop,
            prefix,
            reverse,
            include_key,
            include_value,
        )?;
        PyIterator::open(py, &self.shared, None, &spec)
    }

    /// A consistent read view: later writes are invisible to it.
    fn snapshot(&self, py: Python<'_>) -> PyResult<PySnapshot> {
        let (snap, seq) = self.shared.with_db(py, |db| {
            let snap = db.snapshot();
            let seq = snap.sequence();
            Ok((self.shared.adopt(Mutex::new(Some(snap))), seq))
        })?;
        Ok(PySnapshot {
            shared: Arc::clone(&self.shared),
            snap,
            seq,
        })
    }

    /// Writes the memtable to disk and waits for it.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.shared.with_db(py, Db::flush)
    }

    /// Flushes, then merges every file into the deepest level.
    fn compact(&self, py: Python<'_>) -> PyResult<()> {
        self.compact_range(py, None, None)
    }

    /// Flushes, then merges the files overlapping `[start, end]` (None:
    /// unbounded) into the deepest level.
    #[pyo3(signature = (start=None, end=None))]
    fn compact_range(
        &self,
        py: Python<'_>,
        start: Option<Vec<u8>>,
        end: Option<Vec<u8>>,
    ) -> PyResult<()> {
        self.shared
            .with_db(py, |db| db.compact_range(start.as_deref(), end.as_deref()))
    }

    /// Waits until background flushes and compactions have settled.
    fn wait_for_compactions(&self, py: Python<'_>) -> PyResult<()> {
        self.shared.with_db(py, Db::wait_for_compactions)
    }

    /// Replaces the compaction strategy, e.g. "tiered:b=4".
    fn set_compaction(&self, py: Python<'_>, spec: &str) -> PyResult<()> {
        self.shared.with_db(py, |db| db.set_compaction(spec))
    }

    /// The spec of the compaction strategy in force.
    #[getter]
    fn compaction(&self, py: Python<'_>) -> PyResult<String> {
        self.shared.with_db(py, |db| Ok(db.compaction_spec()))
    }

    /// The value of the engine property `name` (RocksDB's `GetProperty`,
    /// e.g. "lamina.num-files-at-level0", "lamina.stats"), or None for a
    /// name the engine does not know.
    fn property(&self, py: Python<'_>, name: &str) -> PyResult<Option<String>> {
        self.shared.with_db(py, |db| Ok(db.property(name)))
    }

    /// Writes an openable copy of the database as of now to `path`, a new
    /// or empty directory (tables hard-linked); returns what was written:
    /// sequence, files, copied, bytes, manifest.
    fn checkpoint<'py>(&self, py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyDict>> {
        let r = self.shared.with_db(py, |db| db.checkpoint(&path))?;
        let d = PyDict::new(py);
        d.set_item("sequence", r.sequence)?;
        d.set_item("files", r.files)?;
        d.set_item("copied", r.copied)?;
        d.set_item("bytes", r.bytes)?;
        d.set_item("manifest", r.manifest)?;
        Ok(d)
    }

    /// The engine's statistics (`DbStats`) as a dict.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let stats = self.shared.with_db(py, |db| Ok(db.stats()))?;
        to_py(py, &stats)
    }

    /// The database directory.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// True once `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.shared.is_closed()
    }

    /// Flushes the memtable, stops background work and releases the
    /// directory lock, whatever snapshots and iterators of the database are
    /// alive (they raise ClosedError from then on). Closing a closed
    /// database does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.shared.close(py)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        let state = if self.closed() { "closed" } else { "open" };
        format!("<lamina.Db {:?} {state}>", self.path.display().to_string())
    }
}

/// `v` as bytes, or `default` (None if not given).
fn or_default<'py>(
    py: Python<'py>,
    v: Option<Vec<u8>>,
    default: Option<Bound<'py, PyAny>>,
) -> Bound<'py, PyAny> {
    match v {
        Some(v) => PyBytes::new(py, &v).into_any(),
        None => default.unwrap_or_else(|| py.None().into_bound(py)),
    }
}

/// Puts, deletes and range deletes applied together by `Db.write`.
#[pyclass(module = "lamina", name = "WriteBatch")]
#[derive(Default)]
pub struct PyWriteBatch {
    batch: WriteBatch,
}

#[pymethods]
impl PyWriteBatch {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    /// Adds a put of `key` → `value`.
    fn put(&mut self, key: &[u8], value: &[u8]) {
        self.batch.put(key, value);
    }

    /// Adds a delete of `key`.
    fn delete(&mut self, key: &[u8]) {
        self.batch.delete(key);
    }

    /// Adds a delete of every key with `start <= key < end`.
    fn delete_range(&mut self, start: &[u8], end: &[u8]) {
        self.batch.delete_range(start, end);
    }

    /// Removes every operation.
    fn clear(&mut self) {
        self.batch.clear();
    }

    fn __len__(&self) -> usize {
        self.batch.len()
    }

    fn __repr__(&self) -> String {
        format!("<lamina.WriteBatch of {} operations>", self.batch.len())
    }
}

/// A consistent read view of a `Db` (see `Db.snapshot`).
#[pyclass(module = "lamina", name = "Snapshot", frozen)]
pub struct PySnapshot {
    shared: Arc<Shared>,
    /// Emptied by `Db.close()`.
    snap: Arc<Mutex<Option<lamina::Snapshot>>>,
    seq: u64,
}

impl PySnapshot {
    /// Runs `f` on the snapshot, with the GIL released.
    fn with_snap<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&lamina::Snapshot) -> lamina::Result<T> + Send,
    ) -> PyResult<T> {
        self.shared.with_state(py, &self.snap, |_, snap| {
            f(snap.as_ref().ok_or(lamina::Error::Closed)?)
        })
    }
}

#[pymethods]
impl PySnapshot {
    /// The value of `key` as of the snapshot, or `default` (None).
    #[pyo3(signature = (key, default=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &[u8],
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let v = self.with_snap(py, |s| s.get(key))?;
        Ok(or_default(py, v, default))
    }

    /// Like `Db.multi_get`, as of the snapshot.
    fn multi_get<'py>(&self, py: Python<'py>, keys: Vec<Vec<u8>>) -> PyResult<Bound<'py, PyList>> {
        let found = self.with_snap(py, |s| s.multi_get(&keys))?;
        values(py, &found)
    }

    /// Like `Db.scan`, as of the snapshot.
    #[pyo3(signature = (start=None, end=None, reverse=false))]
    fn scan(
        &self,
        py: Python<'_>,
        start: Option<Vec<u8>>,
        end: Option<Vec<u8>>,
        reverse: bool,
    ) -> PyResult<PyIterator> {
        PyIterator::open(
            py,
            &self.shared,
            Some(&self.snap),
            &Spec::range(start, end, reverse),
        )
    }

    /// Like `Db.iterator`, as of the snapshot.
    #[pyo3(signature = (start=None, end=None, *, stop=None, prefix=None, reverse=false, include_key=true, include_value=true))]
    #[expect(
        clippy::too_many_arguments,
        reason = "a Python keyword-argument method: one argument per option"
    )]
    fn iterator(
        &self,
        py: Python<'_>,
        start: Option<Vec<u8>>,
        end: Option<Vec<u8>>,
        stop: Option<Vec<u8>>,
        prefix: Option<Vec<u8>>,
        reverse: bool,
        include_key: bool,
        include_value: bool,
    ) -> PyResult<PyIterator> {
        let spec = iterator_spec(
            start,
            end,
            stop,
            prefix,
            reverse,
            include_key,
            include_value,
        )?;
        PyIterator::open(py, &self.shared, Some(&self.snap), &spec)
    }

    /// The snapshot's sequence number.
    #[getter]
    fn sequence(&self) -> u64 {
        self.seq
    }
}
