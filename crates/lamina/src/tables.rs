//! Opening SST files for the tree, and iterating a sorted run.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::cache::BlockCache;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::user_key;
use crate::sst::{Table, TableIterator};
use crate::stats::IoStats;
use crate::version::FileMeta;
use crate::vfs::Vfs;

/// The name of SST file `id`.
pub fn sst_name(id: u64) -> String {
    format!("{id:06}.sst")
}

/// Opens tables on first use and remembers them in their `FileMeta`.
#[derive(Debug)]
pub struct TableLoader {
    pub(crate) vfs: Arc<dyn Vfs>,
    pub(crate) dir: PathBuf,
    pub(crate) cache: Option<Arc<BlockCache>>,
    pub(crate) stats: Arc<IoStats>,
}

impl TableLoader {
    /// Path of SST `id`.
    pub fn path(&self, id: u64) -> PathBuf {
        self.dir.join(sst_name(id))
    }

    /// The directory holding the files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The opened table of `meta`.
    pub fn table(&self, meta: &FileMeta) -> Result<Arc<Table>> {
        if let Some(t) = meta.table.get() {
            return Ok(Arc::clone(t));
        }
        let file = self.vfs.open_read(&self.path(meta.id))?;
        let table = Table::open(
            file,
            meta.id,
            sst_name(meta.id),
            self.cache.clone(),
            Arc::clone(&self.stats),
        )?;
        // A racing opener may have won; either table is equivalent.
        Ok(Arc::clone(meta.table.get_or_init(|| table)))
    }
}

/// Iterates the files of one sorted run in key order, opening each lazily.
pub struct RunIterator {
    files: Vec<Arc<FileMeta>>,
    loader: Arc<TableLoader>,
    index: usize,
    current: Option<TableIterator>,
}

impl RunIterator {
    /// A cursor over `files` (sorted by key, disjoint).
    pub fn new(files: Vec<Arc<FileMeta>>, loader: Arc<TableLoader>) -> Self {
        RunIterator {
            files,
            loader,
            index: 0,
            current: None,
        }
    }

    fn open(&mut self, index: usize) -> Result<()> {
        self.index = index;
        self.current = match self.files.get(index) {
            Some(meta) => Some(self.loader.table(meta)?.iter()),
            None => None,
        };
        Ok(())
    }

    /// Moves past exhausted files.
    fn skip_empty(&mut self) -> Result<()> {
        while self.current.as_ref().is_some_and(|c| !c.valid()) {
            self.open(self.index + 1)?;
            if let Some(c) = &mut self.current {
                c.seek_to_first()?;
            }
        }
        Ok(())
    }
}

impl InternalIterator for RunIterator {
    fn valid(&self) -> bool {
        self.current.as_ref().is_some_and(|c| c.valid())
    }

    fn key(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |c| c.key())
    }

    fn value(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |c| c.value())
    }

    fn next(&mut self) -> Result<()> {
        if let Some(c) = &mut self.current {
            c.next()?;
        }
        self.skip_empty()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let uk = user_key(target);
        let i = self.files.partition_point(|f| f.largest.as_slice() < uk);
        self.open(i)?;
        if let Some(c) = &mut self.current {
            c.seek(target)?;
        }
        self.skip_empty()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.open(0)?;
        if let Some(c) = &mut self.current {
            c.seek_to_first()?;
        }
        self.skip_empty()
    }
}
