//! `lamina.Error` and its subclasses, one per kind of engine error.
//! `StorageIOError` is also an `OSError` (with its `errno`), so that
//! `except OSError` catches a failed I/O call of the engine as it does
//! Python's own; it is not named `IOError`, which would shadow the builtin
//! in `from lamina import *`.

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyOSError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

create_exception!(lamina, Error, PyException, "Base class of lamina's errors.");
create_exception!(
    lamina,
    CorruptionError,
    Error,
    "Stored bytes failed a checksum or could not be decoded."
);
create_exception!(
    lamina,
    LockedError,
    Error,
    "The directory lock is held: by another process, or by a writing Db of this process (the message says which)."
);
create_exception!(
    lamina,
    InvalidArgumentError,
    Error,
    "An argument or option the engine cannot honour."
);
create_exception!(
    lamina,
    NeedsRepairError,
    Error,
    "The directory holds a database that `lamina repair` must rebuild first."
);
create_exception!(lamina, ClosedError, Error, "The database is closed.");
create_exception!(
    lamina,
    ReadOnlyError,
    Error,
    "A write to a database opened with read_only=True."
);
create_exception!(
    lamina,
    BackgroundError,
    Error,
    "A background flush or compaction failed; writes are refused meanwhile."
);

/// `lamina.StorageIOError`, made at import (a class with two bases,
/// `Error` and `OSError`, which `create_exception!` cannot make).
static STORAGE_IO_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// The class `StorageIOError(Error, OSError)`.
fn storage_io_error_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    STORAGE_IO_ERROR
        .get_or_try_init(py, || {
            let bases = PyTuple::new(
                py,
                [
                    py.get_type::<Error>().into_any(),
                    py.get_type::<PyOSError>().into_any(),
                ],
            )?;
            let attrs = PyDict::new(py);
            attrs.set_item("__module__", "lamina")?;
            attrs.set_item(
                "__doc__",
                "An operating-system I/O call of the engine failed; an OSError with its errno.",
            )?;
            let ty = py
                .get_type::<PyType>()
                .call1(("StorageIOError", bases, attrs))?
                .cast_into::<PyType>()?;
            Ok::<_, PyErr>(ty.unbind())
        })
        .map(|t| t.bind(py))
}

/// A `StorageIOError` with `msg` and, if the OS gave one, its `errno`.
pub fn storage_io(errno: Option<i32>, msg: String) -> PyErr {
    Python::attach(|py| match storage_io_error_type(py) {
        Ok(ty) => match errno {
            Some(n) => PyErr::from_type(ty.clone(), (n, msg)),
            None => PyErr::from_type(ty.clone(), (msg,)),
        },
        Err(e) => e,
    })
}

/// The Python exception of an engine error.
pub fn engine(e: lamina::Error) -> PyErr {
    let msg = e.to_string();
    match e {
        lamina::Error::Io { source, .. } => storage_io(source.raw_os_error(), msg),
        lamina::Error::Corruption { .. } => CorruptionError::new_err(msg),
        lamina::Error::Locked(_) | lamina::Error::LockedInProcess(_) => LockedError::new_err(msg),
        lamina::Error::InvalidArgument(_) | lamina::Error::IncompatibleOption { .. } => {
            InvalidArgumentError::new_err(msg)
        }
        lamina::Error::NeedsRepair { .. } => NeedsRepairError::new_err(msg),
        lamina::Error::Closed => ClosedError::new_err(msg),
        lamina::Error::ReadOnly => ReadOnlyError::new_err(msg),
        lamina::Error::Background(_) => BackgroundError::new_err(msg),
        // `lamina::Error` is non-exhaustive: kinds added later.
        _ => Error::new_err(msg),
    }
}

/// An `InvalidArgumentError` with `msg`.
pub fn invalid(msg: impl Into<String>) -> PyErr {
    InvalidArgumentError::new_err(msg.into())
}

/// Adds the exception classes to module `m`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add("StorageIOError", storage_io_error_type(py)?)?;
    m.add("CorruptionError", py.get_type::<CorruptionError>())?;
    m.add("LockedError", py.get_type::<LockedError>())?;
    m.add(
        "InvalidArgumentError",
        py.get_type::<InvalidArgumentError>(),
    )?;
    m.add("NeedsRepairError", py.get_type::<NeedsRepairError>())?;
    m.add("ClosedError", py.get_type::<ClosedError>())?;
    m.add("ReadOnlyError", py.get_type::<ReadOnlyError>())?;
    m.add("BackgroundError", py.get_type::<BackgroundError>())?;
    Ok(())
}
