//! Where a merge's or flush's output is cut into files, and the files it
//! writes: the [`OutputWriter`], the cutters of partitioned merges and
//! flushes, and the [`Written`] files made durable together.

use std::sync::Arc;

use super::partition::{partitioner, CachedSum, FileCutter, Partitioning, StreamHist};
use crate::error::{Error, Result};
use crate::memtable::MemTable;
use crate::range_del::RangeTombstone;
use crate::sst::TableBuilder;
use crate::tables::sst_name;
use crate::version::FileMeta;
use crate::vfs::{self, WritableFile};

use super::executor::CompactionContext;

/// Files written by a flush or merge: their metadata, and the handles of
/// those not yet synced.
#[derive(Default)]
pub(super) struct Written {
    pub(super) metas: Vec<FileMeta>,
    pub(super) unsynced: Vec<Box<dyn WritableFile>>,
}

/// Finished output files a writer keeps open and unsynced at most; at this
/// many it syncs them together (bounds the open file handles of a merge
/// cut into thousands of small files).
pub(super) const MAX_UNSYNCED: usize = 64;

impl Written {
    pub(super) fn extend(&mut self, other: Written) {
        self.metas.extend(other.metas);
        self.unsynced.extend(other.unsynced);
    }

    /// Syncs the unsynced files together ([`vfs::sync_all`]) and then the
    /// directory, which makes their names durable.
    pub(super) fn make_durable(&mut self, ctx: &CompactionContext<'_>) -> Result<()> {
        vfs::sync_all(&mut self.unsynced)?;
        self.unsynced.clear();
        if !self.metas.is_empty() {
            ctx.table_cache.vfs.sync_dir(ctx.table_cache.dir())?;
        }
        Ok(())
    }
}

/// The cutter of a sub-merge over `files` under `p`: range rules estimate
/// sizes as Alg. 5.8 does, from one histogram `h_m` into which the files'
/// StreamHists are merged, each `SUM` result cached ([`CachedSum`]); a
/// file written without a histogram spreads its bytes evenly over its key
/// images.
pub(super) fn cutter_for(
    ctx: &CompactionContext<'_>,
    p: Partitioning,
    files: &[Arc<FileMeta>],
) -> Result<Box<dyn FileCutter>> {
    let lo = files
        .iter()
        .map(|f| p.image.of(&f.smallest))
        .min()
        .unwrap_or(0);
    let hi = files
        .iter()
        .map(|f| p.image.of(&f.largest))
        .max()
        .unwrap_or(0);
    let partitioner = partitioner(p.partition, p.theta, p.image);
    if !p.partition.uses_ranges() {
        return Ok(partitioner.cutter(lo, hi, &|_, _| 0));
    }
    let mut h_m = StreamHist::default();
    // Data bytes, not file bytes: θ bounds the data a file holds, and a
    // small table's index, filter and histogram would inflate it.
    let mut hist_bytes = 0u64;
    // (lowest image, highest image, data bytes) of the files without one.
    let mut even: Vec<(u64, u64, u64)> = Vec::new();
    for f in files {
        let table = ctx.table_cache.table(f)?;
        let props = table.properties();
        match &props.histogram {
            Some(h_t) => {
                h_m.merge(h_t);
                hist_bytes += props.data_bytes;
            }
            None => even.push((
                p.image.of(&f.smallest),
                p.image.of(&f.largest),
                props.data_bytes,
            )),
        }
    }
    let bytes_per_key = hist_bytes as f64 / h_m.total().max(1) as f64;
    let sums = CachedSum::new(|x: u64| {
        let evenly: f64 = even
            .iter()
            .filter(|&&(l, _, _)| l <= x)
            .map(|&(l, u, bytes)| {
                let width = (u - l) as f64 + 1.0;
                bytes as f64 * (((x.min(u) - l) as f64 + 1.0) / width)
            })
            .sum();
        h_m.sum(x as f64) * bytes_per_key + evenly
    });
    Ok(partitioner.cutter(lo, hi, &|l, u| sums.size_in(l, u)))
}

/// Writes a merge's output as a sequence of SSTs cut at user-key boundaries:
/// where the cutter says, or once a file reaches `target` bytes.
pub(super) struct OutputWriter<'a> {
    pub(super) ctx: &'a CompactionContext<'a>,
    pub(super) target: u64,
    pub(super) cutter: Option<Box<dyn FileCutter>>,
    pub(super) oldest_tombstone: Option<u64>,
    pub(super) builder: Option<(u64, TableBuilder)>,
    pub(super) last_user_key: Vec<u8>,
    pub(super) done: Written,
    /// Range tombstones still to write, sorted by start. Each goes whole
    /// into the file open when the keys pass its start, and no file is
    /// cut inside one: a file's key range spans its tombstones, so the
    /// files of a run stay disjoint.
    pub(super) tombstones: std::collections::VecDeque<RangeTombstone>,
    /// The largest end of the open file's tombstones.
    pub(super) cover_end: Option<Vec<u8>>,
}

impl<'a> OutputWriter<'a> {
    pub(super) fn new(
        ctx: &'a CompactionContext<'a>,
        target: u64,
        oldest_tombstone: Option<u64>,
        cutter: Option<Box<dyn FileCutter>>,
    ) -> Self {
        OutputWriter {
            ctx,
            target: target.max(1),
            cutter,
            oldest_tombstone,
            builder: None,
            last_user_key: Vec::new(),
            done: Written::default(),
            tombstones: std::collections::VecDeque::new(),
            cover_end: None,
        }
    }

    /// The open file's builder, opening a file if none is.
    pub(super) fn builder(&mut self) -> Result<&mut TableBuilder> {
        if self.builder.is_none() {
            let id = (self.ctx.alloc_id)();
            let file = self.ctx.table_cache.create_file(id)?;
            self.builder = Some((
                id,
                TableBuilder::new(file, self.ctx.table_options.clone(), sst_name(id)),
            ));
        }
        match &mut self.builder {
            Some((_, b)) => Ok(b),
            None => Err(Error::InvalidArgument("no open output file".into())),
        }
    }

    /// Writes the pending tombstones that start before `key` (all of them
    /// without one) into the open file.
    pub(super) fn write_tombstones(&mut self, key: Option<&[u8]>) -> Result<()> {
        while let Some(t) = self
            .tombstones
            .front()
            .filter(|t| key.is_none_or(|k| t.start.as_slice() < k))
        {
            if self.cover_end.as_ref().is_none_or(|e| *e < t.end) {
                self.cover_end = Some(t.end.clone());
            }
            let t = t.clone();
            self.tombstones.pop_front();
            self.builder()?.add_range_tombstone(t)?;
        }
        Ok(())
    }

    pub(super) fn add(&mut self, ikey: &[u8], user_key: &[u8], value: &[u8]) -> Result<()> {
        let open = self.builder.as_ref().map(|(_, b)| b.estimated_size());
        let new_key = open.is_none() || self.last_user_key != user_key;
        // Tombstones starting before the key belong to the file before any
        // cut, and a file that reaches the key through one is not cut.
        self.write_tombstones(Some(user_key))?;
        let inside_tombstone = self.cover_end.as_deref().is_some_and(|end| end >= user_key);
        let cut = match &mut self.cutter {
            // Asked at every new key, so range bounds advance with the keys.
            Some(cutter) if new_key => cutter.cut_before(
                user_key,
                open.unwrap_or(0),
                (ikey.len() + value.len()) as u64,
            ),
            Some(_) => false,
            None => new_key && open.is_some_and(|size| size >= self.target),
        };
        if cut && !inside_tombstone {
            self.finish_current()?;
        }
        self.builder()?.add(ikey, value)?;
        self.last_user_key.clear();
        self.last_user_key.extend_from_slice(user_key);
        Ok(())
    }

    /// Finishes the open file, if any, leaving it unsynced (synced with
    /// [`MAX_UNSYNCED`] others, or by the caller with all the rest).
    pub(super) fn finish_current(&mut self) -> Result<()> {
        self.cover_end = None;
        if let Some((id, b)) = self.builder.take() {
            let (props, file) = b.finish(self.ctx.now_ms, self.oldest_tombstone)?;
            self.done
                .metas
                .push(FileMeta::from_properties(id, &props, self.ctx.now_ms));
            self.done.unsynced.push(file);
            if self.done.unsynced.len() >= MAX_UNSYNCED {
                vfs::sync_all(&mut self.done.unsynced)?;
                self.done.unsynced.clear();
            }
        }
        Ok(())
    }

    /// Writes the tombstones left and finishes the last file.
    pub(super) fn finish_last(&mut self) -> Result<()> {
        self.write_tombstones(None)?;
        self.finish_current()
    }

    /// Finishes the last file and makes every file durable, and its name.
    pub(super) fn finish(&mut self) -> Result<Vec<FileMeta>> {
        self.finish_last()?;
        self.done.make_durable(self.ctx)?;
        Ok(std::mem::take(&mut self.done.metas))
    }

    /// Removes every file written so far (best effort: they are unreferenced
    /// and would be collected at the next open anyway).
    pub(super) fn abandon(&mut self) {
        let ids: Vec<u64> = self
            .done
            .metas
            .iter()
            .map(|m| m.id)
            .chain(self.builder.take().map(|(id, _)| id))
            .collect();
        for id in ids {
            let _ = self
                .ctx
                .table_cache
                .vfs
                .remove(&self.ctx.table_cache.path(id));
        }
        self.done = Written::default();
    }
}

/// The cutter of a flush under `p`: the range rules get exact sizes (the
/// bytes of the memtable's entries per key image, summed in key order).
pub(super) fn flush_cutter(mem: &MemTable, p: Partitioning) -> Result<Box<dyn FileCutter>> {
    let partitioner = partitioner(p.partition, p.theta, p.image);
    if !p.partition.uses_ranges() {
        return Ok(partitioner.cutter(0, u64::MAX, &|_, _| 0));
    }
    // (image, bytes up to and including it); images ascend with the keys.
    let mut cumulative: Vec<(u64, u64)> = Vec::new();
    let mut total = 0u64;
    mem.for_each(|ikey, value| {
        let image = p.image.of(crate::key::user_key(ikey));
        total += (ikey.len() + value.len()) as u64;
        match cumulative.last_mut() {
            Some(last) if last.0 == image => last.1 = total,
            _ => cumulative.push((image, total)),
        }
        Ok(())
    })?;
    let upto = |x: u64| -> u64 {
        let i = cumulative.partition_point(|&(image, _)| image <= x);
        i.checked_sub(1).map_or(0, |i| cumulative[i].1)
    };
    let size_in = |l: u64, u: u64| upto(u) - l.checked_sub(1).map_or(0, upto);
    let lo = cumulative.first().map_or(0, |c| c.0);
    let hi = cumulative.last().map_or(0, |c| c.0);
    Ok(partitioner.cutter(lo, hi, &size_in))
}
