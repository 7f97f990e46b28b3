//! The database's own log, `DIR/LOG` (RocksDB's info log): one line per
//! event an operator looks for — opening and recovery, flushes, merges and
//! trivial moves (inputs, outputs, bytes, time), write stalls, background
//! errors, closing.
//!
//! Lines are `<unix ms> <event>: <key>=<value> ...`, appended through the
//! [`Vfs`] and handed to the OS at once (no fsync: the log describes the
//! database, it is not part of it). Writing it is best effort: a failed
//! append never fails the operation it describes; the first failure is
//! reported through `tracing` and the log then stays silent. At open, a LOG
//! longer than [`ROTATE_BYTES`] becomes `LOG.old` (replacing the previous
//! one), so the two stay bounded. A read-only open writes no log.

use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use crate::clock::now_ms;
use crate::filename::{INFO_LOG, INFO_LOG_OLD};
use crate::vfs::{Vfs, WritableFile};

/// A LOG longer than this at open is rotated to `LOG.old`.
pub const ROTATE_BYTES: u64 = 16 << 20;

/// The open info log (or none).
#[derive(Debug, Default)]
pub(crate) struct InfoLog {
    file: Mutex<Option<Box<dyn WritableFile>>>,
    failed: AtomicBool,
}

impl InfoLog {
    /// A log that writes nothing.
    pub(crate) fn disabled() -> InfoLog {
        InfoLog::default()
    }

    /// Opens `dir/LOG` for appending (creating it, or rotating a long one
    /// first). A log that cannot be opened is reported and disabled: the
    /// database opens without it.
    pub(crate) fn open(vfs: &dyn Vfs, dir: &Path) -> InfoLog {
        let path = dir.join(INFO_LOG);
        let opened = (|| {
            if vfs.exists(&path) {
                if vfs.open_read(&path)?.len() > ROTATE_BYTES {
                    vfs.rename(&path, &dir.join(INFO_LOG_OLD))?;
                    return vfs.create(&path);
                }
                return vfs.open_append(&path);
            }
            vfs.create(&path)
        })();
        match opened {
            Ok(f) => InfoLog {
                file: Mutex::new(Some(f)),
                failed: AtomicBool::new(false),
            },
            Err(e) => {
                tracing::warn!(target: "lamina", "cannot open {}: {e}; no info log", path.display());
                InfoLog::disabled()
            }
        }
    }

    /// Appends one event line.
    pub(crate) fn log(&self, event: &str, details: fmt::Arguments<'_>) {
        let mut guard = self.file.lock();
        let Some(file) = guard.as_mut() else {
            return;
        };
        let line = format!("{} {event}: {details}\n", now_ms());
        if let Err(e) = file.append(line.as_bytes()).and_then(|()| file.flush()) {
            *guard = None;
            if !self.failed.swap(true, Ordering::Relaxed) {
                tracing::warn!(target: "lamina", "writing the info log failed: {e}; it stays off until the next open");
            }
        }
    }
}
