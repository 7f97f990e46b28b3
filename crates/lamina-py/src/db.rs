//! `lamina.open`, `Db`, `WriteBatch`, `Snapshot` and the scan iterator.

use std::collections::VecDeque;
use std::ops::Bound as KeyBound;
use std::path::PathBuf;
use std::sync::Arc;

use lamina::{Db, DbIterator, DbRevIterator, Options, WriteBatch};
use parking_lot::{Mutex, RwLock};
use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::convert::to_py;
use crate::errors::{engine, invalid};

/// The open database, `None` once closed. Snapshots and scans hold it too,
/// so that they refuse to go on after `close()`; every engine call holds
/// the read lock, so `close()` waits for calls in flight.
type Shared = Arc<RwLock<Option<Db>>>;

/// Runs `f` on the open database with the GIL released.
fn with_db<T: Send>(
    py: Python<'_>,
    shared: &Shared,
    f: impl FnOnce(&Db) -> lamina::Result<T> + Send,
) -> PyResult<T> {
    py.detach(|| match shared.read().as_ref() {
        Some(db) => f(db),
        None => Err(lamina::Error::Closed),
    })
    .map_err(engine)
}

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
        shared: Arc::new(RwLock::new(Some(db))),
        path,
    })
}

/// An open database (see `lamina.open`).
#[pyclass(module = "lamina", name = "Db", frozen)]
pub struct PyDb {
    shared: Shared,
    path: PathBuf,
}

#[pymethods]
impl PyDb {
    /// Stores `key` → `value`.
    fn put(&self, py: Python<'_>, key: &[u8], value: &[u8]) -> PyResult<()> {
        with_db(py, &self.shared, |db| db.put(key, value))
    }

    /// The value of `key`, or None.
    fn get<'py>(&self, py: Python<'py>, key: &[u8]) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let v = with_db(py, &self.shared, |db| db.get(key))?;
        Ok(v.map(|v| PyBytes::new(py, &v)))
    }

    /// Deletes `key` (a missing key is no error).
    fn delete(&self, py: Python<'_>, key: &[u8]) -> PyResult<()> {
        with_db(py, &self.shared, |db| db.delete(key))
    }

    /// Deletes every key with `start <= key < end` (one range tombstone,
    /// whatever the number of keys; nothing when `start >= end`).
    fn delete_range(&self, py: Python<'_>, start: &[u8], end: &[u8]) -> PyResult<()> {
        with_db(py, &self.shared, |db| db.delete_range(start, end))
    }

    /// Applies `batch` atomically; the batch keeps its operations.
    fn write(&self, py: Python<'_>, batch: PyRef<'_, PyWriteBatch>) -> PyResult<()> {
        let batch = batch.batch.clone();
        with_db(py, &self.shared, |db| db.write(batch))
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
    ) -> PyResult<PyScan> {
        let cursor = with_db(py, &self.shared, |db| {
            let (lo, hi) = bounds(&start, &end);
            Ok(if reverse {
                Cursor::Reverse(db.scan_rev(lo, hi)?)
            } else {
                Cursor::Forward(db.scan(lo, hi)?)
            })
        })?;
        Ok(PyScan::new(&self.shared, cursor))
    }

    /// A consistent read view: later writes are invisible to it.
    fn snapshot(&self, py: Python<'_>) -> PyResult<PySnapshot> {
        let snap = with_db(py, &self.shared, |db| Ok(db.snapshot()))?;
        Ok(PySnapshot {
            shared: Arc::clone(&self.shared),
            snap,
        })
    }

    /// Writes the memtable to disk and waits for it.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        with_db(py, &self.shared, Db::flush)
    }

    /// Flushes, then merges every file into the deepest level.
    fn compact(&self, py: Python<'_>) -> PyResult<()> {
        with_db(py, &self.shared, |db| db.compact_range(None, None))
    }

    /// Waits until background flushes and compactions have settled.
    fn wait_for_compactions(&self, py: Python<'_>) -> PyResult<()> {
        with_db(py, &self.shared, Db::wait_for_compactions)
    }

    /// Replaces the compaction strategy, e.g. "tiered:b=4".
    fn set_compaction(&self, py: Python<'_>, spec: &str) -> PyResult<()> {
        with_db(py, &self.shared, |db| db.set_compaction(spec))
    }

    /// The spec of the compaction strategy in force.
    #[getter]
    fn compaction(&self, py: Python<'_>) -> PyResult<String> {
        with_db(py, &self.shared, |db| Ok(db.compaction_spec()))
    }

    /// The engine's statistics (`DbStats`) as a dict.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let stats = with_db(py, &self.shared, |db| Ok(db.stats()))?;
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
        self.shared.read().is_none()
    }

    /// Flushes the memtable, stops background work and releases the
    /// directory lock. Closing a closed database does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| match self.shared.write().take() {
            Some(db) => db.close(),
            None => Ok(()),
        })
        .map_err(engine)
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

/// The engine's bounds for `[start, end)`.
fn bounds<'a>(
    start: &'a Option<Vec<u8>>,
    end: &'a Option<Vec<u8>>,
) -> (KeyBound<&'a [u8]>, KeyBound<&'a [u8]>) {
    (
        start
            .as_deref()
            .map_or(KeyBound::Unbounded, KeyBound::Included),
        end.as_deref()
            .map_or(KeyBound::Unbounded, KeyBound::Excluded),
    )
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
    shared: Shared,
    snap: lamina::Snapshot,
}

#[pymethods]
impl PySnapshot {
    /// The value of `key` as of the snapshot, or None.
    fn get<'py>(&self, py: Python<'py>, key: &[u8]) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let v = with_db(py, &self.shared, |_| self.snap.get(key))?;
        Ok(v.map(|v| PyBytes::new(py, &v)))
    }

    /// Like `Db.scan`, as of the snapshot.
    #[pyo3(signature = (start=None, end=None, reverse=false))]
    fn scan(
        &self,
        py: Python<'_>,
        start: Option<Vec<u8>>,
        end: Option<Vec<u8>>,
        reverse: bool,
    ) -> PyResult<PyScan> {
        let cursor = with_db(py, &self.shared, |_| {
            let (lo, hi) = bounds(&start, &end);
            Ok(if reverse {
                Cursor::Reverse(self.snap.scan_rev(lo, hi)?)
            } else {
                Cursor::Forward(self.snap.scan(lo, hi)?)
            })
        })?;
        Ok(PyScan::new(&self.shared, cursor))
    }

    /// The snapshot's sequence number.
    #[getter]
    fn sequence(&self) -> u64 {
        self.snap.sequence()
    }
}

/// A forward or reverse engine iterator.
enum Cursor {
    Forward(DbIterator),
    Reverse(DbRevIterator),
}

impl Iterator for Cursor {
    type Item = lamina::Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Cursor::Forward(it) => it.next(),
            Cursor::Reverse(it) => it.next(),
        }
    }
}

/// Entries read per release of the GIL: releasing it per entry would cost
/// more than a memtable step, and a batch stays small.
const PREFETCH: usize = 64;

/// Iterator of `(key, value)` returned by `scan`.
#[pyclass(module = "lamina", name = "Scan")]
pub struct PyScan {
    shared: Shared,
    // A Mutex only to make the class Sync; `&mut self` reaches it unlocked.
    state: Mutex<ScanState>,
}

struct ScanState {
    /// `None` once the engine iterator ended or failed.
    cursor: Option<Cursor>,
    ready: VecDeque<(Vec<u8>, Vec<u8>)>,
    /// An error met while prefetching, raised after the entries before it.
    failed: Option<lamina::Error>,
}

impl PyScan {
    fn new(shared: &Shared, cursor: Cursor) -> PyScan {
        PyScan {
            shared: Arc::clone(shared),
            state: Mutex::new(ScanState {
                cursor: Some(cursor),
                ready: VecDeque::new(),
                failed: None,
            }),
        }
    }
}

impl ScanState {
    /// Reads up to `PREFETCH` entries.
    fn fill(&mut self) {
        let Some(cursor) = self.cursor.as_mut() else {
            return;
        };
        for _ in 0..PREFETCH {
            match cursor.next() {
                Some(Ok(kv)) => self.ready.push_back(kv),
                Some(Err(e)) => {
                    self.failed = Some(e);
                    self.cursor = None;
                    return;
                }
                None => {
                    self.cursor = None;
                    return;
                }
            }
        }
    }
}

#[pymethods]
impl PyScan {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(
        &mut self,
        py: Python<'py>,
    ) -> PyResult<Option<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>> {
        let state = self.state.get_mut();
        if state.ready.is_empty() && state.cursor.is_some() {
            with_db(py, &self.shared, |_| {
                state.fill();
                Ok(())
            })?;
        } else if self.shared.read().is_none() {
            return Err(engine(lamina::Error::Closed));
        }
        match state.ready.pop_front() {
            Some((k, v)) => Ok(Some((PyBytes::new(py, &k), PyBytes::new(py, &v)))),
            None => match state.failed.take() {
                Some(e) => Err(engine(e)),
                None => Ok(None),
            },
        }
    }
}
