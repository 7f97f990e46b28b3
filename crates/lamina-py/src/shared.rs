//! The open database a `Db` shares with its snapshots and iterators, and
//! how `close()` ends them all: each holds its engine object (which holds
//! the engine's state, directory lock included) in a slot the database
//! can empty, so that the lock is released at `close()` whatever Python
//! objects are still alive; they raise `ClosedError` from then on.
//!
//! Lock order: the database's `RwLock`, then a dependent's `Mutex`.

use std::sync::{Arc, Weak};

use lamina::Db;
use parking_lot::{Mutex, RwLock};
use pyo3::prelude::*;

use crate::errors::engine;

/// An object made from the database that holds engine state.
pub trait Dependent: Send + Sync {
    /// Drops the engine objects it holds.
    fn release(&self);
}

/// A slot holding an engine object (a snapshot) until `close()`.
impl<T: Send> Dependent for Mutex<Option<T>> {
    fn release(&self) {
        self.lock().take();
    }
}

/// The open database (`None` once closed) and its dependents.
pub struct Shared {
    /// Every engine call holds the read lock, so `close()` waits for calls
    /// in flight.
    db: RwLock<Option<Db>>,
    dependents: Mutex<Vec<Weak<dyn Dependent>>>,
}

impl Shared {
    pub fn new(db: Db) -> Arc<Shared> {
        Arc::new(Shared {
            db: RwLock::new(Some(db)),
            dependents: Mutex::new(Vec::new()),
        })
    }

    /// True once `close()` ran.
    pub fn is_closed(&self) -> bool {
        self.db.read().is_none()
    }

    /// Runs `f` on the open database with the GIL released.
    pub fn with_db<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&Db) -> lamina::Result<T> + Send,
    ) -> PyResult<T> {
        py.detach(|| match self.db.read().as_ref() {
            Some(db) => f(db),
            None => Err(lamina::Error::Closed),
        })
        .map_err(engine)
    }

    /// Runs `f` on the open database and a dependent's state, with the
    /// GIL released.
    pub fn with_state<S: Send, T: Send>(
        &self,
        py: Python<'_>,
        state: &Mutex<S>,
        f: impl FnOnce(&Db, &mut S) -> lamina::Result<T> + Send,
    ) -> PyResult<T> {
        self.with_db(py, |db| f(db, &mut state.lock()))
    }

    /// Like [`Shared::with_state`], keeping the GIL: for a step that does
    /// no I/O. `None` if the database is busy closing (then take the
    /// other way, which waits without the GIL).
    pub fn try_with_state<S, T>(
        &self,
        state: &Mutex<S>,
        f: impl FnOnce(&mut S) -> T,
    ) -> Option<PyResult<T>> {
        let db = self.db.try_read()?;
        Some(match db.as_ref() {
            Some(_) => Ok(f(&mut state.lock())),
            None => Err(engine(lamina::Error::Closed)),
        })
    }

    /// Registers `dependent`, to be released by `close()`. Call it inside
    /// [`Shared::with_db`], so that `close()` cannot run in between.
    pub fn adopt<D: Dependent + 'static>(&self, dependent: D) -> Arc<D> {
        let d = Arc::new(dependent);
        let weak: Weak<dyn Dependent> = Arc::downgrade(&(Arc::clone(&d) as Arc<dyn Dependent>));
        let mut deps = self.dependents.lock();
        // Dropped ones go before the list would grow: amortized O(1).
        if deps.len() == deps.capacity() {
            deps.retain(|w| w.strong_count() > 0);
        }
        deps.push(weak);
        d
    }

    /// Closes the database (flush, stop background work), then releases
    /// every dependent, so the directory lock goes with the database.
    /// Closing a closed database does nothing.
    pub fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| {
            let mut db = self.db.write();
            let closed = db.take().map_or(Ok(()), Db::close);
            for d in self.dependents.lock().drain(..) {
                if let Some(d) = d.upgrade() {
                    d.release();
                }
            }
            closed
        })
        .map_err(engine)
    }
}
