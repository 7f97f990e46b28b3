//! The one iterator abstraction of the engine and its combinators.
//!
//! Memtables, SST blocks, whole SSTs, sorted runs and the merged view of the
//! tree all implement [`InternalIterator`]: a forward cursor over internal
//! keys (see [`crate::key`]) in internal-key order.

use crate::error::Result;

/// A forward cursor over `(internal key, value)` entries in internal-key order.
pub trait InternalIterator: Send {
    /// True while the cursor points at an entry.
    fn valid(&self) -> bool;
    /// The current internal key. Only meaningful while `valid()`.
    fn key(&self) -> &[u8];
    /// The current value. Only meaningful while `valid()`.
    fn value(&self) -> &[u8];
    /// Advances to the next entry.
    fn next(&mut self) -> Result<()>;
    /// Positions at the first entry whose internal key is `>= target`.
    fn seek(&mut self, target: &[u8]) -> Result<()>;
    /// Positions at the first entry.
    fn seek_to_first(&mut self) -> Result<()>;
}

impl<I: InternalIterator + ?Sized> InternalIterator for Box<I> {
    fn valid(&self) -> bool {
        (**self).valid()
    }
    fn key(&self) -> &[u8] {
        (**self).key()
    }
    fn value(&self) -> &[u8] {
        (**self).value()
    }
    fn next(&mut self) -> Result<()> {
        (**self).next()
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        (**self).seek(target)
    }
    fn seek_to_first(&mut self) -> Result<()> {
        (**self).seek_to_first()
    }
}
