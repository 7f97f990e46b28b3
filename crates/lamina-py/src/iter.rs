//! `lamina.Iterator`: what `Db.scan`, `Db.iterator` and their `Snapshot`
//! twins return, a lazy iterator over a bounded or prefixed key range in
//! either direction that can seek (RocksDB's `Seek`/`SeekForPrev`,
//! plyvel's `seek`), yielding `(key, value)`, keys or values.

use std::collections::VecDeque;
use std::ops::Bound as KeyBound;
use std::sync::Arc;

use lamina::{Cursor, Db};
use parking_lot::Mutex;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::shared::{Dependent, Shared};

/// Entries read per release of the GIL: releasing it per entry would cost
/// more than a memtable step, and a batch stays small.
const PREFETCH: usize = 64;

/// What to iterate: the keyword arguments of `iterator`.
pub struct Spec {
    pub start: Option<Vec<u8>>,
    pub end: Option<Vec<u8>>,
    pub prefix: Option<Vec<u8>>,
    pub reverse: bool,
    pub include_key: bool,
    pub include_value: bool,
}

impl Spec {
    /// The spec of `scan(start, end, reverse)`: `(key, value)` pairs.
    pub fn range(start: Option<Vec<u8>>, end: Option<Vec<u8>>, reverse: bool) -> Spec {
        Spec {
            start,
            end,
            prefix: None,
            reverse,
            include_key: true,
            include_value: true,
        }
    }

    /// Refuses what plyvel refuses: nothing to yield, a prefix with bounds.
    pub fn check(&self) -> PyResult<()> {
        if !self.include_key && !self.include_value {
            return Err(PyValueError::new_err(
                "include_key and include_value cannot both be False",
            ));
        }
        if self.prefix.is_some() && (self.start.is_some() || self.end.is_some()) {
            return Err(PyTypeError::new_err(
                "give prefix or start/end (stop), not both",
            ));
        }
        Ok(())
    }

    /// A cursor over the range from `db` (or from the snapshot `snap`),
    /// at the first entry in the iterator's direction.
    pub fn cursor(&self, db: &Db, snap: Option<&lamina::Snapshot>) -> lamina::Result<Cursor> {
        let mut cursor = match (&self.prefix, snap) {
            (Some(p), None) => db.prefix_iter(p)?,
            (Some(p), Some(s)) => s.prefix_iter(p)?,
            (None, None) => db.iter(lower(&self.start), upper(&self.end))?,
            (None, Some(s)) => s.iter(lower(&self.start), upper(&self.end))?,
        };
        if self.reverse {
            cursor.seek_to_last()?;
        } else {
            cursor.seek_to_first()?;
        }
        Ok(cursor)
    }
}

fn lower(k: &Option<Vec<u8>>) -> KeyBound<&[u8]> {
    k.as_deref().map_or(KeyBound::Unbounded, KeyBound::Included)
}

fn upper(k: &Option<Vec<u8>>) -> KeyBound<&[u8]> {
    k.as_deref().map_or(KeyBound::Unbounded, KeyBound::Excluded)
}

/// An iterator's engine side.
pub struct IterState {
    /// `None` once `close()` released it.
    cursor: Option<Cursor>,
    reverse: bool,
    include_value: bool,
    /// Entries read ahead (values left empty without `include_value`).
    ready: VecDeque<(Vec<u8>, Vec<u8>)>,
    /// An error met while reading ahead, raised after the entries before it.
    failed: Option<lamina::Error>,
}

impl Dependent for Mutex<IterState> {
    fn release(&self) {
        let mut st = self.lock();
        st.cursor = None;
        st.ready.clear();
    }
}

impl IterState {
    /// Reads up to `PREFETCH` entries.
    fn fill(&mut self) {
        let Some(c) = self.cursor.as_mut() else {
            return;
        };
        while self.ready.len() < PREFETCH && c.valid() {
            let value = if self.include_value {
                c.value().to_vec()
            } else {
                Vec::new()
            };
            self.ready.push_back((c.key().to_vec(), value));
            let moved = if self.reverse { c.prev() } else { c.next() };
            if let Err(e) = moved {
                self.failed = Some(e);
                return;
            }
        }
    }

    /// The next entry, or the error met before it, or `None` at the end.
    fn pop(&mut self) -> Option<lamina::Result<(Vec<u8>, Vec<u8>)>> {
        match self.ready.pop_front() {
            Some(kv) => Some(Ok(kv)),
            None => self.failed.take().map(Err),
        }
    }

    /// Repositions the cursor with `seek`, dropping what was read ahead.
    fn reposition(
        &mut self,
        seek: impl FnOnce(&mut Cursor) -> lamina::Result<()>,
    ) -> lamina::Result<()> {
        self.ready.clear();
        self.failed = None;
        seek(self.cursor.as_mut().ok_or(lamina::Error::Closed)?)
    }
}

/// Iterator over a key range of a `Db` or `Snapshot` (see `Db.iterator`).
#[pyclass(module = "lamina", name = "Iterator", frozen)]
pub struct PyIterator {
    shared: Arc<Shared>,
    state: Arc<Mutex<IterState>>,
    include_key: bool,
    include_value: bool,
}

impl PyIterator {
    /// The iterator of `spec` over `shared`'s database, or over the
    /// snapshot in `snap` (a slot `close()` empties).
    pub fn open(
        py: Python<'_>,
        shared: &Arc<Shared>,
        snap: Option<&Mutex<Option<lamina::Snapshot>>>,
        spec: &Spec,
    ) -> PyResult<PyIterator> {
        spec.check()?;
        let state = shared.with_db(py, |db| {
            let cursor = match snap {
                Some(slot) => {
                    spec.cursor(db, Some(slot.lock().as_ref().ok_or(lamina::Error::Closed)?))?
                }
                None => spec.cursor(db, None)?,
            };
            Ok(shared.adopt(Mutex::new(IterState {
                cursor: Some(cursor),
                reverse: spec.reverse,
                include_value: spec.include_value,
                ready: VecDeque::new(),
                failed: None,
            })))
        })?;
        Ok(PyIterator {
            shared: Arc::clone(shared),
            state,
            include_key: spec.include_key,
            include_value: spec.include_value,
        })
    }

    /// An entry as the iterator yields it.
    fn item<'py>(
        &self,
        py: Python<'py>,
        (k, v): (Vec<u8>, Vec<u8>),
    ) -> PyResult<Bound<'py, PyAny>> {
        Ok(match (self.include_key, self.include_value) {
            (true, true) => {
                PyTuple::new(py, [PyBytes::new(py, &k), PyBytes::new(py, &v)])?.into_any()
            }
            (true, false) => PyBytes::new(py, &k).into_any(),
            _ => PyBytes::new(py, &v).into_any(),
        })
    }

    fn seek_with(
        &self,
        py: Python<'_>,
        seek: impl FnOnce(&mut Cursor) -> lamina::Result<()> + Send,
    ) -> PyResult<()> {
        self.shared
            .with_state(py, &self.state, |_, st| st.reposition(seek))
    }
}

#[pymethods]
impl PyIterator {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        // An entry read ahead is taken without releasing the GIL.
        let ready = self
            .shared
            .try_with_state(&self.state, |st| st.ready.pop_front())
            .transpose()?
            .flatten();
        let next = match ready {
            Some(kv) => Some(kv),
            None => self.shared.with_state(py, &self.state, |_, st| {
                if st.ready.is_empty() {
                    st.fill();
                }
                st.pop().transpose()
            })?,
        };
        next.map(|kv| self.item(py, kv)).transpose()
    }

    /// Positions the iterator so that `next()` yields the first entry with
    /// a key `>= key` (then goes on in the iterator's direction).
    fn seek(&self, py: Python<'_>, key: Vec<u8>) -> PyResult<()> {
        self.seek_with(py, move |c| c.seek(&key))
    }

    /// Positions the iterator so that `next()` yields the last entry with
    /// a key `<= key` (then goes on in the iterator's direction).
    fn seek_for_prev(&self, py: Python<'_>, key: Vec<u8>) -> PyResult<()> {
        self.seek_with(py, move |c| c.seek_for_prev(&key))
    }

    /// Positions the iterator at the first entry of its range.
    fn seek_to_first(&self, py: Python<'_>) -> PyResult<()> {
        self.seek_with(py, Cursor::seek_to_first)
    }

    /// Positions the iterator at the last entry of its range.
    fn seek_to_last(&self, py: Python<'_>) -> PyResult<()> {
        self.seek_with(py, Cursor::seek_to_last)
    }

    /// Drops the engine's state early (the database closing does it too);
    /// the iterator then yields nothing more.
    fn close(&self) {
        self.state.release();
    }
}
