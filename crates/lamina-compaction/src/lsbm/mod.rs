//! The LSbM compaction buffer (seed 002 §4, Algorithm 1) in the tree model.
//!
//! A *host* is a sorted run of a level `i ≥ 1`. Its buffer holds, per round
//! that merged a run of level `i − 1` into it, one buffer table: the files of
//! that run as they were before the merge (same file numbers, so blocks the
//! block cache holds for them stay valid), in key order. Tables are kept
//! newest first; `B_i^0` is `tables[0]`. A file leaves the buffer by being
//! *removed*: its data goes, its key range (and size) stays as a marker that
//! stops lookups from reading older tables (seed 002 §4.1, §5).
//!
//! Every version in a buffer table is also in the host, or was superseded
//! there by a newer version from a newer round, whose table is newer. So a
//! point lookup may answer from the newest table with a live file holding
//! the key, must fall back to the host at the first removed file covering
//! it, and reads the same versions either way (Algorithm 3). A range is read
//! from the tables instead of the host only if every round of the host is
//! in the buffer (`complete`) and no removed file overlaps the range
//! (Algorithm 4).
//!
//! The same functions change the engine's `Version` (files are
//! `Arc<FileMeta>`) and the planner's `TreeView` (files are `FileView`), so
//! the engine and the simulator keep the same buffer.
//!
//! The simulator trims no buffer, so the last level's buffer keeps every
//! file moved into it and grows with the tree, and a drain step appends to
//! one buffer, reads the bytes of another and retires files of a third. So
//! a buffer keeps, beside its tables, where each file number's slot is and
//! its byte totals, and each table the number of removed slots it starts
//! with: appending, removing and the totals cost no scan of the buffer,
//! and the pace rule merges the tables in key order, reading only the
//! files it retires and each table's next live file (the pace rule
//! retires smallest largest key first, so the removed slots gather at the
//! front of each table).
//!
//! Every slot a buffer operation reads or edits adds one to a per-thread
//! counter ([`crate::work::buffer_visits`]), as [`crate::work::file_visits`] counts the files of
//! runs: tests bound a flush's work with it, so bookkeeping that scans a
//! whole buffer shows up as work that grows with the tree.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

fn visit<T>(item: T) -> T {
    crate::work::add_buffer_visits(1);
    item
}

/// What the buffer needs to know of a file.
pub trait BufferFile {
    /// File number.
    fn file_id(&self) -> u64;
    /// Bytes on disk.
    fn file_size(&self) -> u64;
    /// Smallest user key.
    fn first_key(&self) -> &[u8];
    /// Largest user key.
    fn last_key(&self) -> &[u8];
}

impl<F: BufferFile> BufferFile for std::sync::Arc<F> {
    fn file_id(&self) -> u64 {
        F::file_id(self)
    }
    fn file_size(&self) -> u64 {
        F::file_size(self)
    }
    fn first_key(&self) -> &[u8] {
        F::first_key(self)
    }
    fn last_key(&self) -> &[u8] {
        F::last_key(self)
    }
}

/// A file removed from the buffer: only its identity, key range and size
/// remain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    /// File number the data had.
    pub id: u64,
    /// Smallest user key.
    pub smallest: Vec<u8>,
    /// Largest user key.
    pub largest: Vec<u8>,
    /// Bytes the file had.
    pub size: u64,
}

impl Marker {
    /// The marker left by `f`.
    pub fn of<F: BufferFile>(f: &F) -> Marker {
        Marker {
            id: f.file_id(),
            smallest: f.first_key().to_vec(),
            largest: f.last_key().to_vec(),
            size: f.file_size(),
        }
    }
}

/// One file of a buffer table.
#[derive(Debug, Clone)]
pub enum Slot<F> {
    /// Readable: its blocks may be cached.
    Live(F),
    /// Removed: lookups covering its range fall back to the host.
    Removed(Marker),
}

impl<F: BufferFile> Slot<F> {
    /// File number.
    pub fn id(&self) -> u64 {
        match self {
            Slot::Live(f) => f.file_id(),
            Slot::Removed(r) => r.id,
        }
    }
    /// Smallest user key.
    pub fn smallest(&self) -> &[u8] {
        match self {
            Slot::Live(f) => f.first_key(),
            Slot::Removed(r) => &r.smallest,
        }
    }
    /// Largest user key.
    pub fn largest(&self) -> &[u8] {
        match self {
            Slot::Live(f) => f.last_key(),
            Slot::Removed(r) => &r.largest,
        }
    }
    /// Bytes the file has (or had).
    pub fn size(&self) -> u64 {
        match self {
            Slot::Live(f) => f.file_size(),
            Slot::Removed(r) => r.size,
        }
    }
    /// The live file, if any.
    pub fn live(&self) -> Option<&F> {
        match self {
            Slot::Live(f) => Some(f),
            Slot::Removed(_) => None,
        }
    }
}

/// The files one round moved into the host: one drained run's files.
#[derive(Debug, Clone)]
pub struct BufferTable<F> {
    /// Id of the run the round drained (it names the round).
    pub source: u64,
    /// Files in key order, disjoint; [`Buffer::append`] and
    /// [`Buffer::remove`] change them and keep the buffer's index of them.
    slots: Vec<Slot<F>>,
    /// How many slots at the front are removed: the first live file is at
    /// or after this index.
    removed_prefix: usize,
}

impl<F> BufferTable<F> {
    /// The files in key order, disjoint (removed ones as markers).
    pub fn slots(&self) -> &[Slot<F>] {
        &self.slots
    }
}

impl<F: BufferFile> BufferTable<F> {
    /// The first live file at index `from` or later, with its index.
    fn live_from(&self, from: usize) -> Option<(usize, &F)> {
        self.slots
            .get(from..)?
            .iter()
            .enumerate()
            .find_map(|(i, s)| visit(s).live().map(|f| (from + i, f)))
    }

    /// The slot whose key range holds `key`.
    pub fn slot_for(&self, key: &[u8]) -> Option<&Slot<F>> {
        let i = self.slots.partition_point(|s| s.largest() < key);
        self.slots.get(i).filter(|s| s.smallest() <= key)
    }
}

/// Where a file's slot is in a buffer.
#[derive(Debug, Clone, Copy)]
struct SlotAt {
    /// Its table, counted from the oldest: tables are only added as the
    /// newest, so this count stays put while their index in
    /// [`Buffer::tables`] grows.
    round: usize,
    /// Its index in the table.
    slot: usize,
}

/// A host's compaction buffer.
#[derive(Debug, Clone)]
pub struct Buffer<F> {
    /// Tables, newest first; [`Buffer::append`] and [`Buffer::remove`]
    /// change them and keep the buffer's index of them.
    tables: Vec<BufferTable<F>>,
    /// True if every round that filled the host has a table: the buffer
    /// was created with the host. Only then may a range read the tables
    /// instead of the host.
    pub complete: bool,
    /// `S'`: bytes of live files when the host began draining into the next
    /// level (seed 002 Alg. 1), the base of the retirement pace; `None`
    /// while the host receives.
    pub base: Option<u64>,
    /// Every slot's place, by file number.
    at: HashMap<u64, SlotAt>,
    /// Bytes of the live files.
    live_bytes: u64,
    /// Bytes of every slot, removed files included.
    bytes_in: u64,
    /// Removed slots.
    removed: usize,
    /// Bytes the host held before the newest round's first unit merged into
    /// it (recorded by [`BufferChange::Round`]): the base of the round's
    /// repeated-data measure ([`Buffer::repeated_in_round`]).
    round_base: Option<u64>,
    /// Bytes of the newest table's slots (removed files included): what the
    /// newest round has compacted into the host so far.
    round_in: u64,
}

impl<F> Buffer<F> {
    /// The tables, newest first.
    pub fn tables(&self) -> &[BufferTable<F>] {
        &self.tables
    }

    /// The same buffer with every live file turned into `G` by `f`, which
    /// keeps each file's number, size and keys (the same file seen another
    /// way).
    pub fn map<G>(&self, f: impl Fn(&F) -> G) -> Buffer<G> {
        Buffer {
            tables: self
                .tables
                .iter()
                .map(|t| BufferTable {
                    source: t.source,
                    slots: t
                        .slots
                        .iter()
                        .map(|s| match s {
                            Slot::Live(x) => Slot::Live(f(x)),
                            Slot::Removed(m) => Slot::Removed(m.clone()),
                        })
                        .collect(),
                    removed_prefix: t.removed_prefix,
                })
                .collect(),
            complete: self.complete,
            base: self.base,
            at: self.at.clone(),
            live_bytes: self.live_bytes,
            bytes_in: self.bytes_in,
            removed: self.removed,
            round_base: self.round_base,
            round_in: self.round_in,
        }
    }
}

impl<F: BufferFile> Buffer<F> {
    /// An empty buffer.
    pub fn new(complete: bool) -> Self {
        Buffer {
            tables: Vec::new(),
            complete,
            base: None,
            at: HashMap::new(),
            live_bytes: 0,
            bytes_in: 0,
            removed: 0,
            round_base: None,
            round_in: 0,
        }
    }

    /// The fraction of the bytes the newest round compacted into the host
    /// that were repeated data: versions of keys the host already held (or
    /// that the round brought twice), which the merges dropped. With `B`
    /// the host's bytes before the round, `I` the bytes the round brought
    /// and `H` the host's bytes now (`host_bytes`), the merges dropped
    /// `B + I − H` bytes, all of them obsolete versions, so `(B + I − H) / I`
    /// of what came in was repeated (seed 002 §4.1 compares `H` with what
    /// was compacted into the host). `None` before the round brought
    /// anything or if its base is unknown. Clamped to `[0, 1]`: values
    /// that differ in size (or compress differently) blur it slightly.
    pub fn repeated_in_round(&self, host_bytes: u64) -> Option<f64> {
        let base = self.round_base?;
        if self.round_in == 0 {
            return None;
        }
        let dropped = base
            .saturating_add(self.round_in)
            .saturating_sub(host_bytes);
        Some((dropped as f64 / self.round_in as f64).clamp(0.0, 1.0))
    }

    /// The host's bytes before the newest round (see
    /// [`BufferChange::Round`]).
    pub fn round_base(&self) -> Option<u64> {
        self.round_base
    }

    /// The source run of the newest table (the round being appended).
    pub fn newest_source(&self) -> Option<u64> {
        self.tables.first().map(|t| t.source)
    }

    /// Bytes of the live files.
    pub fn live_bytes(&self) -> u64 {
        self.live_bytes
    }

    /// Bytes every round brought in, removed files included: what was
    /// compacted into the host since it was created.
    pub fn bytes_in(&self) -> u64 {
        self.bytes_in
    }

    /// Live files, newest table first.
    pub fn live_files(&self) -> impl Iterator<Item = &F> {
        self.tables
            .iter()
            .flat_map(|t| t.slots.iter().map(visit).filter_map(Slot::live))
    }

    /// Removed files still marked.
    pub fn removed_count(&self) -> usize {
        self.removed
    }

    /// Live files, smallest largest key first, ties newest table first:
    /// the tables (each in key order, so by largest key too) merged,
    /// reading the files handed out and each table's next live file.
    fn live_by_largest_key(&self) -> impl Iterator<Item = &F> {
        let mut heads: BinaryHeap<Reverse<(&[u8], usize, usize)>> = self
            .tables
            .iter()
            .enumerate()
            .filter_map(|(t, table)| {
                let (i, f) = table.live_from(table.removed_prefix)?;
                Some(Reverse((f.last_key(), t, i)))
            })
            .collect();
        std::iter::from_fn(move || {
            let Reverse((_, t, i)) = heads.pop()?;
            let table = self.tables.get(t)?;
            if let Some((next, f)) = table.live_from(i + 1) {
                heads.push(Reverse((f.last_key(), t, next)));
            }
            table.slots.get(i)?.live()
        })
    }

    /// Appends `slot`, moved down from run `source`, to the newest table if
    /// that table is the same round: same source, and the slot lies beyond
    /// every slot it holds (a run drains in key order). Otherwise the slot
    /// starts a new newest table: a new source, or a run that received
    /// data again and restarted its drain. Tables stay key-disjoint, and
    /// every slot is newer than every slot of an older table.
    pub fn append(&mut self, source: u64, slot: Slot<F>) {
        if self.at.contains_key(&slot.id()) {
            return;
        }
        let continues = self.tables.first().is_some_and(|t| {
            t.source == source
                && t.slots
                    .last()
                    .is_none_or(|last| visit(last).largest() < slot.smallest())
        });
        if !continues {
            self.round_in = 0;
            self.tables.insert(
                0,
                BufferTable {
                    source,
                    slots: Vec::new(),
                    removed_prefix: 0,
                },
            );
        }
        let round = self.tables.len() - 1;
        let Some(table) = self.tables.first_mut() else {
            return;
        };
        let at = SlotAt {
            round,
            slot: table.slots.len(),
        };
        self.at.insert(slot.id(), at);
        self.bytes_in = self.bytes_in.saturating_add(slot.size());
        self.round_in = self.round_in.saturating_add(slot.size());
        match slot.live() {
            Some(f) => self.live_bytes = self.live_bytes.saturating_add(f.file_size()),
            None => {
                self.removed += 1;
                if table.removed_prefix == at.slot {
                    table.removed_prefix += 1;
                }
            }
        }
        table.slots.push(visit(slot));
    }

    /// Marks file `id` removed; true if it was live.
    pub fn remove(&mut self, id: u64) -> bool {
        let Some(&SlotAt { round, slot }) = self.at.get(&id) else {
            return false;
        };
        let Some(table) = self
            .tables
            .len()
            .checked_sub(round + 1)
            .and_then(|t| self.tables.get_mut(t))
        else {
            return false;
        };
        let Some(Slot::Live(f)) = table.slots.get(slot).map(visit) else {
            return false;
        };
        self.live_bytes = self.live_bytes.saturating_sub(f.file_size());
        self.removed += 1;
        table.slots[slot] = Slot::Removed(Marker::of(f));
        while table
            .slots
            .get(table.removed_prefix)
            .is_some_and(|s| visit(s).live().is_none())
        {
            table.removed_prefix += 1;
        }
        true
    }

    /// Whether a range `[lo, hi]` may be read from the tables instead of the
    /// host (Algorithm 4): the buffer is complete, some live file overlaps
    /// the range, and no removed file does.
    pub fn serves_range(&self, lo: &[u8], hi: Option<&[u8]>) -> bool {
        if !self.complete {
            return false;
        }
        let mut live = false;
        for table in &self.tables {
            // A table is in key order: the slots overlapping the range are
            // those from the first ending at or after `lo` to the last
            // starting at or before `hi`.
            let from = table.slots.partition_point(|s| s.largest() < lo);
            let overlapping = table.slots[from..]
                .iter()
                .map(visit)
                .take_while(|s| hi.is_none_or(|hi| s.smallest() <= hi));
            for slot in overlapping {
                if slot.live().is_none() {
                    return false;
                }
                live = true;
            }
        }
        live
    }

    /// The live files to retire, smallest largest key first, so that after
    /// the host drains to `host_after` bytes of a capacity `capacity`,
    /// `|B'| / S' <= |C'| / S` (seed 002 Alg. 1's pace rule). `S'` is
    /// [`Buffer::base`], or the live bytes now if the host has not begun
    /// draining.
    pub fn pace(&self, host_after: u64, capacity: u64) -> Vec<u64> {
        let base = self.base.unwrap_or(self.live_bytes);
        let mut bytes = self.live_bytes;
        let mut out = Vec::new();
        for f in self.live_by_largest_key() {
            // bytes / base > host_after / capacity, in integers.
            if (bytes as u128) * (capacity.max(1) as u128) <= (host_after as u128) * (base as u128)
            {
                break;
            }
            bytes -= f.file_size();
            out.push(f.file_id());
        }
        out
    }
}

/// Every host's buffer, by host run id.
pub type Buffers<F> = BTreeMap<u64, Buffer<F>>;

/// Seed 002 §5's four-component level: the files drained from `C'_i` (run
/// `source`) form the newest table of a host of level `i + 1`
/// (`B_{i+1}^0`), so `C'_i ∪ B_{i+1}^0` is one unit whose key ranges
/// complement each other, and it gates `B'_i` (`source`'s own buffer) as
/// `C_i` gates `B_i`. The slot covering `key` of the newest tables of
/// `source` among the buffers `below` (those of level `i + 1`'s hosts):
/// where `C'_i` no longer covers `key`, this slot (its file's filter, or a
/// marker's range) decides whether a lookup consults `B'_i`.
pub fn drained_slot<'a, F: BufferFile + 'a>(
    below: impl IntoIterator<Item = &'a Buffer<F>>,
    source: u64,
    key: &[u8],
) -> Option<&'a Slot<F>> {
    below.into_iter().find_map(|b| {
        b.tables
            .iter()
            .take_while(|t| t.source == source)
            .find_map(|t| visit(t.slot_for(key)))
    })
}

/// One change to the buffers, as the planner decides it and the engine logs
/// it in the manifest.
#[derive(Debug, Clone)]
pub enum BufferChange<F> {
    /// Creates `host`'s buffer if it has none.
    New {
        /// Host run id.
        host: u64,
        /// Whether every round of the host will have a table.
        complete: bool,
    },
    /// Appends a live file to the table of round `source`.
    Keep {
        /// Host run id.
        host: u64,
        /// Round (drained run id).
        source: u64,
        /// The file.
        file: F,
    },
    /// Appends an already removed file to the table of round `source` (a
    /// frozen buffer keeps only the marker).
    Mark {
        /// Host run id.
        host: u64,
        /// Round (drained run id).
        source: u64,
        /// The marker.
        removed: Marker,
    },
    /// Removes a live file (retirement or trimming).
    Remove {
        /// Host run id.
        host: u64,
        /// File number.
        file: u64,
    },
    /// Drops `host`'s buffer: a merge without a buffer task wrote into the
    /// host, so its tables no longer hold every round.
    Drop {
        /// Host run id.
        host: u64,
    },
    /// Records `S'` for a host that begins draining.
    Base {
        /// Host run id.
        host: u64,
        /// Bytes.
        bytes: u64,
    },
    /// Records the host's bytes before a round's first unit merges into it
    /// (the base of [`Buffer::repeated_in_round`]).
    Round {
        /// Host run id.
        host: u64,
        /// Bytes.
        bytes: u64,
    },
}

impl<F> BufferChange<F> {
    /// The same change, borrowing its file.
    pub fn as_ref(&self) -> BufferChange<&F> {
        match self {
            BufferChange::New { host, complete } => BufferChange::New {
                host: *host,
                complete: *complete,
            },
            BufferChange::Keep { host, source, file } => BufferChange::Keep {
                host: *host,
                source: *source,
                file,
            },
            BufferChange::Mark {
                host,
                source,
                removed,
            } => BufferChange::Mark {
                host: *host,
                source: *source,
                removed: removed.clone(),
            },
            BufferChange::Remove { host, file } => BufferChange::Remove {
                host: *host,
                file: *file,
            },
            BufferChange::Drop { host } => BufferChange::Drop { host: *host },
            BufferChange::Base { host, bytes } => BufferChange::Base {
                host: *host,
                bytes: *bytes,
            },
            BufferChange::Round { host, bytes } => BufferChange::Round {
                host: *host,
                bytes: *bytes,
            },
        }
    }

    /// The same change with its file (if it names a live one) turned into
    /// `G` by `f`.
    pub fn try_map<G, E>(
        self,
        f: impl FnOnce(F) -> std::result::Result<G, E>,
    ) -> std::result::Result<BufferChange<G>, E> {
        Ok(match self {
            BufferChange::New { host, complete } => BufferChange::New { host, complete },
            BufferChange::Keep { host, source, file } => BufferChange::Keep {
                host,
                source,
                file: f(file)?,
            },
            BufferChange::Mark {
                host,
                source,
                removed,
            } => BufferChange::Mark {
                host,
                source,
                removed,
            },
            BufferChange::Remove { host, file } => BufferChange::Remove { host, file },
            BufferChange::Drop { host } => BufferChange::Drop { host },
            BufferChange::Base { host, bytes } => BufferChange::Base { host, bytes },
            BufferChange::Round { host, bytes } => BufferChange::Round { host, bytes },
        })
    }
}

/// Applies `changes` in order, then drops the buffers of hosts for which
/// `host_exists` is false. A change naming a host without a buffer, or a
/// file already removed, changes nothing: the trim pass and a compaction
/// may remove the same file.
pub fn apply_changes<F: BufferFile>(
    buffers: &mut Buffers<F>,
    changes: impl IntoIterator<Item = BufferChange<F>>,
    host_exists: impl Fn(u64) -> bool,
) {
    for change in changes {
        match change {
            BufferChange::New { host, complete } => {
                buffers.entry(host).or_insert_with(|| Buffer::new(complete));
            }
            BufferChange::Keep { host, source, file } => {
                if let Some(b) = buffers.get_mut(&host) {
                    b.append(source, Slot::Live(file));
                }
            }
            BufferChange::Mark {
                host,
                source,
                removed,
            } => {
                if let Some(b) = buffers.get_mut(&host) {
                    b.append(source, Slot::Removed(removed));
                }
            }
            BufferChange::Remove { host, file } => {
                if let Some(b) = buffers.get_mut(&host) {
                    b.remove(file);
                }
            }
            BufferChange::Drop { host } => {
                buffers.remove(&host);
            }
            BufferChange::Base { host, bytes } => {
                if let Some(b) = buffers.get_mut(&host) {
                    b.base.get_or_insert(bytes);
                }
            }
            BufferChange::Round { host, bytes } => {
                if let Some(b) = buffers.get_mut(&host) {
                    b.round_base = Some(bytes);
                }
            }
        }
    }
    buffers.retain(|host, _| host_exists(*host));
}

/// What a task does to the buffers besides its merge (set by the `lsbm`
/// strategy; see [`crate::plan::Plan::buffer_changes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferTask {
    /// The input run whose files the merge moves down (`C'_i`): they join
    /// the output run's buffer as the table of this round.
    pub source: u64,
    /// The output run's buffer is frozen (it holds repeated data): the
    /// files are deleted as without a buffer, and only markers of their
    /// ranges join it.
    pub frozen: bool,
    /// Live buffer files of the source run to remove now (the pace rule).
    pub retire: Vec<u64>,
    /// `S'` of the source run's buffer, if it begins draining with this task.
    pub base: Option<u64>,
    /// The output run's bytes before this task, if the task is the first
    /// unit of a round into it (the base of the round's repeated-data
    /// measure, [`Buffer::repeated_in_round`]).
    pub round_base: Option<u64>,
}

/// The rule of the trim pass (seed 002 Alg. 2), run by the engine because
/// it reads the block cache: every `interval_ms`, a live file of any table
/// but a host's newest with less than `threshold` of its blocks cached is
/// removed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrimRule {
    /// Milliseconds between passes.
    pub interval_ms: u64,
    /// Fraction of a file's blocks that must be cached for it to stay.
    pub threshold: f64,
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::view::notation::file;
    use crate::FileView;

    #[test]
    fn rounds_make_tables_newest_first_and_removal_leaves_a_marker() {
        let mut b = Buffer::new(true);
        b.append(1, Slot::Live(file("11['a'-'c']=5")));
        b.append(1, Slot::Live(file("10['m'-'p']=5")));
        b.append(2, Slot::Live(file("20['b'-'n']=7")));
        assert_eq!(
            b.tables.iter().map(|t| t.source).collect::<Vec<_>>(),
            [2, 1]
        );
        assert_eq!(b.tables[1].slots[0].id(), 11);
        // A run that drains again from below its progress starts a round.
        let mut again = b.clone();
        again.append(2, Slot::Live(file("21['a'-'b']=1")));
        assert_eq!(
            again.tables.iter().map(|t| t.source).collect::<Vec<_>>(),
            [2, 2, 1]
        );
        assert_eq!(b.live_bytes(), 17);
        assert!(b.remove(10));
        assert!(!b.remove(10));
        assert_eq!(b.live_bytes(), 12);
        assert_eq!(b.bytes_in(), 17);
        assert!(matches!(b.tables[1].slot_for(b"o"), Some(Slot::Removed(_))));
        assert!(b.tables[1].slot_for(b"d").is_none());
        // A range touching the marker goes to the host; one clear of it may
        // use the tables.
        assert!(!b.serves_range(b"o", Some(b"z")));
        assert!(b.serves_range(b"a", Some(b"b")));
        assert!(!b.serves_range(b"q", Some(b"z")));
        assert!(!b.serves_range(b"a", None));
        b.complete = false;
        assert!(!b.serves_range(b"a", Some(b"b")));
    }

    #[test]
    fn pace_keeps_the_buffer_share_at_or_below_the_host_share() {
        let mut b = Buffer::new(true);
        for (i, k) in ["b", "d", "f", "h"].iter().enumerate() {
            b.append(1, Slot::Live(file(&format!("{i}['{k}'-'{k}']=10"))));
        }
        b.base = Some(40);
        // Host at 100 of 100: nothing goes; at 75: one file (30/40 <= 0.75);
        // at 0: all, smallest largest key first.
        assert!(b.pace(100, 100).is_empty());
        assert_eq!(b.pace(75, 100), vec![0]);
        assert_eq!(b.pace(74, 100), vec![0, 1]);
        assert_eq!(b.pace(0, 100), vec![0, 1, 2, 3]);
    }

    /// A buffer as tables of `(file, live)`, newest first, scanned for
    /// everything: the rules of seed 002 Alg. 1, 3 and 4 stated directly.
    #[derive(Debug, Default)]
    struct Model {
        tables: Vec<(u64, Vec<(FileView, bool)>)>,
    }

    impl Model {
        fn slots(&self) -> impl Iterator<Item = &(FileView, bool)> {
            self.tables.iter().flat_map(|(_, t)| t)
        }

        fn append(&mut self, source: u64, f: FileView, live: bool) {
            if self.slots().any(|(g, _)| g.id == f.id) {
                return;
            }
            let continues = self.tables.first().is_some_and(|(s, t)| {
                *s == source && t.last().is_none_or(|(g, _)| g.largest < f.smallest)
            });
            if !continues {
                self.tables.insert(0, (source, Vec::new()));
            }
            self.tables[0].1.push((f, live));
        }

        fn remove(&mut self, id: u64) -> bool {
            let slot = self.tables.iter_mut().flat_map(|(_, t)| t);
            match slot.into_iter().find(|(f, _)| f.id == id) {
                Some((_, live)) => std::mem::replace(live, false),
                None => false,
            }
        }

        fn live_bytes(&self) -> u64 {
            self.slots().filter(|(_, l)| *l).map(|(f, _)| f.size).sum()
        }

        /// Every live file sorted (stably) by largest key, retired until
        /// the buffer's share is at most the host's.
        fn pace(&self, base: Option<u64>, host_after: u64, capacity: u64) -> Vec<u64> {
            let base = base.unwrap_or_else(|| self.live_bytes());
            let mut live: Vec<&FileView> =
                self.slots().filter(|(_, l)| *l).map(|(f, _)| f).collect();
            live.sort_by(|a, b| a.largest.cmp(&b.largest));
            let mut bytes = self.live_bytes();
            let mut out = Vec::new();
            for f in live {
                if bytes as u128 * capacity.max(1) as u128 <= host_after as u128 * base as u128 {
                    break;
                }
                bytes -= f.size;
                out.push(f.id);
            }
            out
        }

        fn serves_range(&self, lo: &[u8], hi: Option<&[u8]>) -> bool {
            let overlaps = |f: &FileView| {
                f.largest.as_ref() >= lo && hi.is_none_or(|hi| f.smallest.as_ref() <= hi)
            };
            self.slots().any(|(f, l)| *l && overlaps(f))
                && !self.slots().any(|(f, l)| !*l && overlaps(f))
        }
    }

    proptest::proptest! {
        /// Random rounds of appends (live and removed, repeated file
        /// numbers, rounds that restart) and removals against the model:
        /// the same tables, totals, retirements and range answers.
        #[test]
        fn buffer_matches_a_scanned_model(
            ops in proptest::collection::vec(
                (0u8..6, 0u64..3, 0u64..40, 0u8..60, 0u8..4, 1u64..100),
                1..80,
            ),
        ) {
            let mut b: Buffer<FileView> = Buffer::new(true);
            let mut model = Model::default();
            for (kind, source, id, lo, width, size) in ops {
                let f = FileView {
                    id,
                    size,
                    smallest: vec![lo].into(),
                    largest: vec![lo + width].into(),
                    ..FileView::default()
                };
                match kind {
                    0..=2 => {
                        model.append(source, f.clone(), true);
                        b.append(source, Slot::Live(f));
                    }
                    3 => {
                        model.append(source, f.clone(), false);
                        b.append(source, Slot::Removed(Marker::of(&f)));
                    }
                    _ => proptest::prop_assert_eq!(b.remove(id), model.remove(id)),
                }
                let shape = |t: &BufferTable<FileView>| {
                    let slots = t.slots.iter().map(|s| (s.id(), s.live().is_some()));
                    (t.source, slots.collect::<Vec<_>>())
                };
                let model_shape = |(source, t): &(u64, Vec<(FileView, bool)>)| {
                    (*source, t.iter().map(|(f, l)| (f.id, *l)).collect::<Vec<_>>())
                };
                proptest::prop_assert_eq!(
                    b.tables.iter().map(shape).collect::<Vec<_>>(),
                    model.tables.iter().map(model_shape).collect::<Vec<_>>()
                );
                proptest::prop_assert_eq!(b.live_bytes(), model.live_bytes());
                proptest::prop_assert_eq!(
                    b.bytes_in(),
                    model.slots().map(|(f, _)| f.size).sum::<u64>()
                );
                proptest::prop_assert_eq!(
                    b.removed_count(),
                    model.slots().filter(|(_, l)| !*l).count()
                );
                for base in [None, Some(b.live_bytes() / 2 + 1)] {
                    b.base = base;
                    for (after, cap) in [(0, 100), (40, 100), (90, 100), (100, 100), (7, 0)] {
                        proptest::prop_assert_eq!(
                            b.pace(after, cap),
                            model.pace(base, after, cap)
                        );
                    }
                }
                b.base = None;
                for (lo, hi) in [(0, Some(70)), (lo, Some(lo)), (lo, Some(lo + 5)), (lo, None)] {
                    let hi = hi.map(|h: u8| [h]);
                    proptest::prop_assert_eq!(
                        b.serves_range(&[lo], hi.as_ref().map(|h| &h[..])),
                        model.serves_range(&[lo], hi.as_ref().map(|h| &h[..])),
                        "range {}..={:?}", lo, hi
                    );
                }
            }
        }
    }

    #[test]
    fn changes_apply_in_order_and_buffers_follow_their_hosts() {
        let mut bufs: Buffers<FileView> = Buffers::new();
        apply_changes(
            &mut bufs,
            vec![
                BufferChange::New {
                    host: 7,
                    complete: true,
                },
                BufferChange::Keep {
                    host: 7,
                    source: 3,
                    file: file("1['a'-'b']=4"),
                },
                BufferChange::Mark {
                    host: 7,
                    source: 3,
                    removed: Marker::of(&file("2['c'-'d']=4")),
                },
                BufferChange::Remove { host: 9, file: 1 },
                BufferChange::Base { host: 7, bytes: 4 },
                BufferChange::Base { host: 7, bytes: 99 },
            ],
            |h| h == 7,
        );
        let b = &bufs[&7];
        assert_eq!((b.live_bytes(), b.bytes_in(), b.base), (4, 8, Some(4)));
        apply_changes(&mut bufs, Vec::new(), |_| false);
        assert!(bufs.is_empty());
    }
}
