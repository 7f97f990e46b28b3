//! The metadata of one SST file in the tree ([`FileMeta`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use lamina_compaction::lsbm::BufferFile;
use lamina_compaction::placement;

use crate::coding::{get_bytes, get_varint, put_bytes, put_varint};
use crate::spatial::Rect;
use crate::sst::TableProperties;

/// Metadata of one SST file.
#[derive(Debug)]
pub struct FileMeta {
    /// File number; the file is named `{id:06}.sst`.
    pub id: u64,
    /// Size in bytes.
    pub size: u64,
    /// Entries (versions) stored.
    pub entries: u64,
    /// Tombstones stored.
    pub tombstones: u64,
    /// Smallest user key.
    pub smallest: Vec<u8>,
    /// Largest user key.
    pub largest: Vec<u8>,
    /// Smallest sequence number.
    pub smallest_seq: u64,
    /// Largest sequence number.
    pub largest_seq: u64,
    /// When the file was written (unix ms).
    pub created_ms: u64,
    /// When the oldest tombstone in the file was written (unix ms).
    pub oldest_tombstone_ms: Option<u64>,
    /// User key + value bytes stored, an estimate of the logical data size.
    pub raw_bytes: u64,
    /// When the file arrived in its level (unix ms; not persisted: after an
    /// open, its creation time). Trivial moves update it.
    pub(crate) arrived_ms: AtomicU64,
    /// When a point lookup last probed the file (unix ms; not persisted).
    pub(crate) last_read_ms: AtomicU64,
    /// The MBR of the file's points (files of a spatial index only): window
    /// queries skip files whose MBR misses the window.
    pub mbr: Option<Rect>,
    /// Whether the file holds range tombstones, once known (not persisted:
    /// learnt from the properties of a new file or when the table cache
    /// opens it). A cursor gathers the range tombstones of every file its
    /// bounds overlap; this lets it skip the table-cache lookup of files
    /// known to hold none.
    pub(crate) range_tombstones: OnceLock<bool>,
}

impl FileMeta {
    /// False only if the file is known to hold no range tombstone.
    pub(crate) fn may_hold_range_tombstones(&self) -> bool {
        self.range_tombstones.get().copied().unwrap_or(true)
    }

    /// True if the key ranges `[lo, hi]` and this file's intersect.
    pub fn overlaps(&self, lo: &[u8], hi: &[u8]) -> bool {
        self.smallest.as_slice() <= hi && lo <= self.largest.as_slice()
    }

    /// When the file arrived in its level (unix ms).
    pub fn arrived_ms(&self) -> u64 {
        self.arrived_ms.load(Ordering::Relaxed)
    }

    /// When a point lookup last probed the file (unix ms), or its arrival.
    pub fn last_read_ms(&self) -> u64 {
        self.last_read_ms
            .load(Ordering::Relaxed)
            .max(self.arrived_ms())
    }

    /// Records a point lookup probing the file at `now_ms`.
    pub(crate) fn touch(&self, now_ms: u64) {
        // Most lookups land in the millisecond already recorded: a plain
        // load spares them the read-modify-write on a shared cache line.
        if now_ms > self.last_read_ms.load(Ordering::Relaxed) {
            self.last_read_ms.fetch_max(now_ms, Ordering::Relaxed);
        }
    }

    pub(super) fn encode(&self, dst: &mut Vec<u8>) {
        for v in [
            self.id,
            self.size,
            self.entries,
            self.tombstones,
            self.smallest_seq,
            self.largest_seq,
            self.created_ms,
            self.oldest_tombstone_ms.map_or(0, |t| t + 1),
            self.raw_bytes,
        ] {
            put_varint(dst, v);
        }
        put_bytes(dst, &self.smallest);
        put_bytes(dst, &self.largest);
    }

    pub(super) fn decode(src: &mut &[u8]) -> Option<FileMeta> {
        let mut v = [0u64; 9];
        for slot in &mut v {
            *slot = get_varint(src)?;
        }
        let smallest = get_bytes(src)?.to_vec();
        let largest = get_bytes(src)?.to_vec();
        Some(FileMeta {
            id: v[0],
            size: v[1],
            entries: v[2],
            tombstones: v[3],
            smallest_seq: v[4],
            largest_seq: v[5],
            created_ms: v[6],
            oldest_tombstone_ms: v[7].checked_sub(1),
            raw_bytes: v[8],
            smallest,
            largest,
            arrived_ms: AtomicU64::new(v[6]),
            last_read_ms: AtomicU64::new(0),
            mbr: None,
            range_tombstones: OnceLock::new(),
        })
    }
}

impl BufferFile for FileMeta {
    fn file_id(&self) -> u64 {
        self.id
    }
    fn file_size(&self) -> u64 {
        self.size
    }
    fn first_key(&self) -> &[u8] {
        &self.smallest
    }
    fn last_key(&self) -> &[u8] {
        &self.largest
    }
}

impl FileMeta {
    /// The metadata of table `id` as its properties block describes it,
    /// written at `now_ms`.
    pub(crate) fn from_properties(id: u64, p: &TableProperties, now_ms: u64) -> FileMeta {
        FileMeta {
            id,
            size: p.file_size,
            entries: p.entries,
            tombstones: p.tombstones,
            smallest: p.smallest_key.clone(),
            largest: p.largest_key.clone(),
            smallest_seq: p.smallest_seq,
            largest_seq: p.largest_seq,
            created_ms: now_ms,
            oldest_tombstone_ms: if p.tombstones > 0 {
                p.oldest_tombstone_time
            } else {
                None
            },
            raw_bytes: p.raw_key_bytes + p.raw_value_bytes,
            arrived_ms: AtomicU64::new(now_ms),
            last_read_ms: AtomicU64::new(0),
            mbr: p.mbr,
            range_tombstones: OnceLock::from(p.range_tombstones > 0),
        }
    }

    /// A copy of the metadata without the opened table.
    pub fn clone_meta(&self) -> FileMeta {
        FileMeta {
            id: self.id,
            size: self.size,
            entries: self.entries,
            tombstones: self.tombstones,
            smallest: self.smallest.clone(),
            largest: self.largest.clone(),
            smallest_seq: self.smallest_seq,
            largest_seq: self.largest_seq,
            created_ms: self.created_ms,
            oldest_tombstone_ms: self.oldest_tombstone_ms,
            raw_bytes: self.raw_bytes,
            arrived_ms: AtomicU64::new(self.arrived_ms()),
            last_read_ms: AtomicU64::new(self.last_read_ms.load(Ordering::Relaxed)),
            mbr: self.mbr,
            range_tombstones: self.range_tombstones.clone(),
        }
    }
}

impl placement::KeyRanged for FileMeta {
    fn smallest(&self) -> &[u8] {
        &self.smallest
    }
}
