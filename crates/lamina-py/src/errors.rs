//! `lamina.Error` and its subclasses, one per kind of engine error.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(lamina, Error, PyException, "Base class of lamina's errors.");
create_exception!(
    lamina,
    IOError,
    Error,
    "An operating-system I/O call failed."
);
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
    "Another process or Db holds the directory lock."
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

/// The Python exception of an engine error.
pub fn engine(e: lamina::Error) -> PyErr {
    let msg = e.to_string();
    match e {
        lamina::Error::Io { .. } => IOError::new_err(msg),
        lamina::Error::Corruption { .. } => CorruptionError::new_err(msg),
        lamina::Error::Locked(_) => LockedError::new_err(msg),
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

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add("IOError", py.get_type::<IOError>())?;
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
