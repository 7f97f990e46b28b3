//! The `lamina` Python module: the engine (`open` → `Db`), the model
//! simulator (`sim`) and experiment specs (`experiment`).
//!
//! Engine calls that may read or write files run with the GIL released, so
//! other Python threads go on meanwhile. A `Db` is shared by its snapshots
//! and iterators, which refuse to go on once it is closed (`shared`).

mod convert;
mod db;
mod errors;
mod iter;
mod lab;
mod shared;

use pyo3::prelude::*;

/// The module `lamina`.
#[pymodule(name = "lamina")]
fn lamina_py(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(db::open, m)?)?;
    m.add_function(wrap_pyfunction!(lab::sim, m)?)?;
    m.add_function(wrap_pyfunction!(lab::experiment, m)?)?;
    m.add_class::<db::PyDb>()?;
    m.add_class::<db::PyWriteBatch>()?;
    m.add_class::<db::PySnapshot>()?;
    m.add_class::<iter::PyIterator>()?;
    errors::register(m)
}
