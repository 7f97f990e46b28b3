//! The tree as policies see it: a [`TreeView`] (an owned, read-only
//! picture: per level its runs, per run its files with sizes, key ranges,
//! ages and tombstone counts), the containers that keep a run's files and a
//! level's runs ([`Files`], [`Runs`], both over sorted `blocks`), the keys
//! they hold ([`InlineKey`]), the least-overlap rankings ([`index`]), the
//! placement rules shared with the engine's `Version` ([`placement`]) and a
//! text picture of a tree for tests ([`notation`]).

pub(crate) mod blocks;
pub mod files;
pub mod index;
pub mod key;
pub mod notation;
pub mod runs;

pub use files::Files;
pub use key::InlineKey;
pub use runs::Runs;

use crate::{geometry, lsbm};

/// The tree model's two placement rules, shared by every tree type (the
/// engine's `Version` and the [`TreeView`] that policies, the planner and
/// the simulator use), so a run or a file lands in the same place in both.
pub mod placement {
    /// The rank of a *tile*: a one-file run of a spatially partitioned
    /// level (leveled with `partition=str|rstar-grove`, seed 000 §4.3).
    /// The tiles of a level hold disjoint sets of keys — a key shared with
    /// another run lies in both files' MBRs, and the planner admits a tile
    /// only if no other tile of its level can hold one of its keys — so no
    /// two tiles of a level ever need ordering; they rank below every other
    /// run of the level (flushes rank from 1 up).
    pub const TILE_RANK: u64 = 0;

    /// A sorted run with a recency rank (larger = newer).
    pub trait Ranked {
        /// The run's rank.
        fn order(&self) -> u64;
    }

    /// A file with a key range.
    pub trait KeyRanged {
        /// Its smallest user key.
        fn smallest(&self) -> &[u8];
    }

    impl<F: KeyRanged> KeyRanged for std::sync::Arc<F> {
        fn smallest(&self) -> &[u8] {
            F::smallest(self)
        }
    }

    /// Where a run ranked `order` goes among `runs` (newest first): after
    /// every newer run.
    pub fn run_slot<R: Ranked>(runs: &[R], order: u64) -> usize {
        runs.partition_point(|r| r.order() > order)
    }

    /// The runs of the oldest rank among a level's `runs`: its oldest
    /// sorted run, or every tile of a tiled level. Space amplification
    /// takes the deepest level's as the estimate of the live data.
    pub fn oldest_rank<R: Ranked>(runs: &[R]) -> impl Iterator<Item = &R> {
        let oldest = runs.iter().map(R::order).min().unwrap_or(0);
        runs.iter().filter(move |r| r.order() == oldest)
    }

    /// Where a file starting at `smallest` goes among `files` (key order,
    /// disjoint): after every file starting below it.
    pub fn file_slot<F: KeyRanged>(files: &[F], smallest: &[u8]) -> usize {
        files.partition_point(|f| f.smallest() < smallest)
    }
}

impl placement::Ranked for RunView {
    fn order(&self) -> u64 {
        self.order
    }
}

/// A policy's picture of a file is what LSbM's buffer model keeps of it.
impl lsbm::BufferFile for FileView {
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

impl placement::KeyRanged for FileView {
    fn smallest(&self) -> &[u8] {
        &self.smallest
    }
}

/// A read-only picture of one file.
#[derive(Debug, Clone, Default)]
pub struct FileView {
    /// File id.
    pub id: u64,
    /// Bytes on disk.
    pub size: u64,
    /// Entries stored.
    pub entries: u64,
    /// Tombstones stored.
    pub tombstones: u64,
    /// Smallest user key (inline if short: copying a file allocates
    /// nothing).
    pub smallest: InlineKey,
    /// Largest user key.
    pub largest: InlineKey,
    /// Creation time (unix ms).
    pub created_ms: u64,
    /// Time of the oldest tombstone (unix ms).
    pub oldest_tombstone_ms: Option<u64>,
    /// Smallest sequence number stored: the age of the file's oldest data.
    pub smallest_seq: u64,
    /// When the file arrived in its level (unix ms): its creation, or the
    /// trivial move that brought it there (since the last open).
    pub arrived_ms: u64,
    /// When a point lookup last read the file (unix ms; its arrival if never).
    pub last_read_ms: u64,
    /// True while a running compaction owns the file; policies must not pick it.
    pub busy: bool,
    /// The MBR of the file's points, for a spatial index's files (seed 000
    /// ch. 4); `None` otherwise.
    pub mbr: Option<geometry::Rect>,
}

impl FileView {
    /// True if this file's key range intersects `[lo, hi]`.
    pub fn overlaps(&self, lo: &[u8], hi: &[u8]) -> bool {
        self.smallest.as_slice() <= hi && lo <= self.largest.as_slice()
    }

    /// False only if the two files cannot hold a common key: their key
    /// ranges are disjoint, or both are spatial and their MBRs are (a key
    /// is a point, which lies in the MBR of every file holding it).
    pub fn may_share_keys(&self, other: &FileView) -> bool {
        self.overlaps(&other.smallest, &other.largest)
            && match (&self.mbr, &other.mbr) {
                (Some(a), Some(b)) => a.intersects(b),
                _ => true,
            }
    }
}

/// A read-only picture of one sorted run.
#[derive(Debug, Clone)]
pub struct RunView {
    /// Run id.
    pub id: u64,
    /// Recency rank (larger = newer).
    pub order: u64,
    /// Files sorted by key.
    pub files: Files,
}

impl RunView {
    /// Bytes of the run.
    pub fn bytes(&self) -> u64 {
        self.files.bytes()
    }

    /// Files intersecting `[lo, hi]`, in key order (policies ask this for
    /// every file of a level; a scan made the simulator superlinear).
    pub fn overlapping<'a>(
        &'a self,
        lo: &[u8],
        hi: &[u8],
    ) -> impl DoubleEndedIterator<Item = &'a FileView> + Clone + 'a {
        self.files.overlapping(lo, hi)
    }
}

/// A read-only picture of one level.
#[derive(Debug, Clone, Default)]
pub struct LevelView {
    /// Runs, newest first.
    pub runs: Runs,
}

impl LevelView {
    /// Bytes of the level.
    pub fn bytes(&self) -> u64 {
        self.runs.iter().map(RunView::bytes).sum()
    }
}

/// A read-only picture of the tree handed to policies.
#[derive(Debug, Clone, Default)]
pub struct TreeView {
    /// Levels, shallowest first. Flushes add a new run to level 0.
    pub levels: Vec<LevelView>,
    /// Flushes so far.
    pub flushes: u64,
    /// Memtable size in bytes (the size of a full flush).
    pub memtable_bytes: u64,
    /// Current time (unix ms).
    pub now_ms: u64,
    /// Compaction buffers (seed 002, LSbM) by host run id.
    pub compaction_buffers: lsbm::Buffers<FileView>,
    /// Least-overlap rankings of runs, kept up to date by
    /// [`plan::apply`](crate::plan::apply) (see [`index`]); a new view starts with none.
    pub index: index::OverlapIndex,
}

impl TreeView {
    /// The level at `i`, or an empty one beyond the deepest level.
    pub fn level(&self, i: usize) -> &LevelView {
        static EMPTY: LevelView = LevelView { runs: Runs::new() };
        self.levels.get(i).unwrap_or(&EMPTY)
    }
}
