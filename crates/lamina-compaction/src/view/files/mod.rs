//! The files of a sorted run, kept so that a merge costs the files it
//! touches, not the files of the run.
//!
//! A leveled run of the model simulator grows to millions of files, and
//! about one merge per level and flush takes a few of them out and puts a
//! few back. In a `Vec` sorted by key every such edit shifted the rest of
//! the run and every input was found by a scan for its id, which made a
//! simulation quadratic in its flushes; in a B-tree each file taken out
//! or put back cost a descent from the root, a string of cache misses
//! once the run outgrew the cache. [`Files`] keeps the files in sorted
//! blocks of at most 128 (`blocks.rs`) by smallest key (ties by id), with
//! the run's byte total kept as files come and go. A merge's inputs are
//! consecutive files of a run and its outputs fill the gap they leave:
//! [`Files::get_all`] finds the inputs with one search, [`Files::take_all`]
//! takes them out and [`Files::extend_from`] files the outputs with one
//! search and one splice each.
//!
//! Tasks name files by id, and files are sorted by key. The planner's
//! lookup of a task's first id is answered by the position of the first
//! file the run's last search handed out (a policy names what it just
//! found) or by the run's first file (a whole run); a merge takes its
//! inputs out by key. Only a lookup by id that neither answers builds an
//! id → key map, which the run then keeps up to date: a simulation's
//! merges build none ([`crate::work::id_maps`] counts them), where a map per run cost a
//! hash insert and remove per file written, a cache miss each past 10^5
//! files, and a quarter of the memory.
//!
//! | operation | cost |
//! | --- | --- |
//! | [`Files::get`], [`Files::insert`], [`Files::remove`], [`Files::update`], [`Files::at`] | O(log n) + a block's shift (the first lookup by id that needs the id map: O(n) to build it) |
//! | [`Files::get_all`], [`Files::remove_all`], [`Files::take_all`], [`Extend`] of k consecutive files | O(log n + k) + a block's shift |
//! | [`Files::overlapping`]`(lo, hi)`, [`Files::window`] returning k files | O(log n + k) |
//! | [`Files::len`], [`Files::bytes`] | O(1) |
//! | [`Files::first`], [`Files::last`] | O(1) |
//!
//! Keys are held as [`PackedKey`]s: the first eight bytes as an integer,
//! the rest (none for the simulator's 8-byte keys) on the heap. A run of
//! millions of files is searched by integer compares instead of a `memcmp`
//! behind a pointer per key, and filing a file allocates no key.
//!
//! Every file an operation hands out or edits adds one to a per-thread
//! counter ([`crate::work::file_visits`]): tests bound the work of a flush with it, so a scan
//! of a whole run (an id search, a rebuild, a shift of a vector) shows up
//! as work that grows with the tree. A second counter ([`crate::work::searches`])
//! counts every search of a run's blocks from the top, which a walk over
//! neighbours does not repeat: tests tell a search per file from one walk with it. An
//! implementation of this type must keep counting what it visits or moves
//! and where it searches.

mod entry;
#[cfg(test)]
mod tests;
mod totals;

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;

pub(crate) use entry::{Overlap, Span};
pub use entry::{PackedKey, Spare};

use crate::view::blocks::{self, Blocks, Pos, Range};
use crate::{work, FileView, InlineKey};
use entry::{before, span, Filed};
use totals::{age, Totals, LEAST_READ, LEAST_SEQ, MOST_READ, MOST_SEQ, NEWEST};

/// Counts one search of a run's blocks from the top.
fn search() {
    work::add_searches(1);
}

fn visit<T>(item: T) -> T {
    work::add_file_visits(1);
    item
}

fn visit_file(filed: &Filed) -> &FileView {
    visit(&filed.file)
}

/// Hashes file ids so that ids made together land together: a merge makes
/// its outputs' ids in a row, and a later merge takes many of them out
/// together. Groups of eight consecutive ids share a hash, plus their rank
/// in the group, so they fill neighbouring buckets: in a table of 10^6
/// ids, filing or dropping a merge's files costs a cache miss or two
/// instead of one per file (FxHash scattered them). The group's hash is
/// FxHash's multiply, whose high bits (the table's tags) still differ
/// between groups.
#[derive(Debug, Default, Clone, Copy)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Ids hash through `write_u64`; anything else folds in bytewise.
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, id: u64) {
        let group = (self.0 ^ (id >> 3)).wrapping_mul(0xf135_7aea_2e62_a9c5);
        self.0 = group.wrapping_add(id & 7);
    }
}

/// The files of one sorted run, in key order; see the module docs.
#[derive(Debug, Clone, Default)]
pub struct Files {
    by_key: Blocks<Filed>,
    /// File id → smallest key, for lookups by id that [`Recent`] does not
    /// answer: built by the first such lookup, then kept up to date.
    key_of: OnceLock<IdMap>,
    recent: Recent,
    totals: Totals,
}

type IdMap = HashMap<u64, PackedKey, BuildHasherDefault<IdHasher>>;

/// The first file the run's last search handed out, and where it was. A
/// policy names in its task the files it just found, so the planner's
/// lookup of a task's first id lands here, and a run needs no id map for
/// its merges (a hash insert and remove per file written, a cache miss
/// each past 10^5 files). A hint checked before use: the file at the
/// position must have the id (relaxed atomics, so a view stays `Sync`).
#[derive(Debug, Default)]
struct Recent {
    id: AtomicU64,
    pos: AtomicU64,
}

impl Clone for Recent {
    fn clone(&self) -> Self {
        Recent {
            id: AtomicU64::new(self.id.load(Relaxed)),
            pos: AtomicU64::new(self.pos.load(Relaxed)),
        }
    }
}

impl Recent {
    fn set(&self, id: u64, pos: Pos) {
        self.id.store(id, Relaxed);
        self.pos.store(pos.pack(), Relaxed);
    }

    fn get(&self, id: u64) -> Option<Pos> {
        (self.id.load(Relaxed) == id).then(|| Pos::unpack(self.pos.load(Relaxed)))
    }
}

impl Files {
    /// No files.
    pub fn new() -> Files {
        Files::default()
    }

    /// Number of files.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// True if there are no files.
    pub fn is_empty(&self) -> bool {
        self.by_key.len() == 0
    }

    /// Bytes of the files.
    pub fn bytes(&self) -> u64 {
        self.totals.bytes
    }

    /// Tombstones in the files: the tombstone triggers and movement
    /// policies read no file of a run without any.
    pub fn tombstones(&self) -> u64 {
        self.totals.tombstones
    }

    /// Files a running compaction owns.
    pub fn busy(&self) -> usize {
        self.totals.busy
    }

    /// The newest arrival among the files and the largest key among the
    /// files that arrived then (a round-robin cursor); `None` for no files.
    /// Kept as files come and go: a pick reads no file, unless the last
    /// file that arrived then left since the last call (then the files
    /// are read once, counted as visits).
    pub fn newest_arrival(&self) -> Option<(u64, &InlineKey)> {
        let newest = self.totals.newest.get(self, &NEWEST);
        newest.map(|(at, key)| (*at, key))
    }

    /// True if every file was last read at the same time (or there are
    /// none); kept as [`Files::newest_arrival`] is.
    pub fn reads_tie(&self) -> bool {
        let t = &self.totals;
        let least = t.least_read.get(self, &LEAST_READ).map(|r| r.0);
        least == t.most_read.get(self, &MOST_READ).copied()
    }

    /// True if every file's oldest data has the same sequence number (or
    /// there are none); kept as [`Files::newest_arrival`] is.
    pub fn seqs_tie(&self) -> bool {
        let t = &self.totals;
        let least = t.least_seq.get(self, &LEAST_SEQ).map(|r| r.0);
        least == t.most_seq.get(self, &MOST_SEQ).copied()
    }

    /// The files in order of their oldest data (smallest sequence number),
    /// ties in key order. The order is built at the first call (every file
    /// visited once) and kept as files come and go, so a pick that takes
    /// one of the first reads a few files, not the run.
    pub fn by_age(&self) -> impl DoubleEndedIterator<Item = &FileView> + Clone {
        let ages = self
            .totals
            .by_age
            .get_or_init(|| self.by_key.iter().map(|f| age(visit_file(f))).collect());
        ages.iter().filter_map(move |(_, key, id)| {
            search();
            let pos = self.by_key.partition_point(|s| before(s, key, *id));
            let f = self.by_key.get(pos).filter(|f| f.id() == *id)?;
            Some(visit_file(f))
        })
    }

    /// True once [`Files::by_age`] keeps the run's order by age.
    pub fn keeps_ages(&self) -> bool {
        self.totals.by_age.get().is_some()
    }

    /// The files whose smallest key is greater than `key`, in key order,
    /// then the rest from the first (every file from the first if `key` is
    /// `None`): a round-robin cursor's order.
    pub fn wrapping_after(&self, key: Option<&[u8]>) -> impl Iterator<Item = &FileView> {
        let at = match key {
            Some(key) => {
                search();
                let key = PackedKey::new(key);
                self.by_key.partition_point(|s| s.0 <= key)
            }
            None => self.by_key.start(),
        };
        let (start, end) = (self.by_key.start(), self.by_key.end());
        Iter(self.by_key.range(at, end)).chain(Iter(self.by_key.range(start, at)))
    }

    /// The files in key order.
    pub fn iter(&self) -> Iter<'_> {
        Iter(self.by_key.iter())
    }

    /// The file with the smallest keys.
    pub fn first(&self) -> Option<&FileView> {
        self.iter().next()
    }

    /// The file with the largest keys.
    pub fn last(&self) -> Option<&FileView> {
        self.iter().next_back()
    }

    /// Where the file with id `id` is: where the last search found it
    /// ([`Recent`]), the first file, or else through the id map.
    fn find(&self, id: u64) -> Option<Pos> {
        let has = |pos: Pos| self.by_key.get(pos).is_some_and(|f| f.id() == id);
        if let Some(pos) = [self.recent.get(id), Some(self.by_key.start())]
            .into_iter()
            .flatten()
            .find(|&pos| has(pos))
        {
            return Some(pos);
        }
        let key = self.id_map().get(&id)?;
        search();
        let pos = self.by_key.partition_point(|s| before(s, key, id));
        has(pos).then_some(pos)
    }

    /// The id map, built now if no lookup needed it before (a visit of
    /// every file).
    fn id_map(&self) -> &IdMap {
        self.key_of.get_or_init(|| {
            work::add_id_maps(1);
            self.by_key
                .iter()
                .map(|f| (visit(f).id(), f.smallest().clone()))
                .collect()
        })
    }

    /// Where `f`, a file of the run as read from it, is: a search by its
    /// key, which needs no id lookup (and lands in the block the search
    /// that found `f` left the finger on); by its id if its key changed.
    fn find_file(&self, f: &FileView) -> Option<Pos> {
        let smallest = PackedKey::new(&f.smallest);
        search();
        let pos = self.by_key.partition_point(|s| before(s, &smallest, f.id));
        match self.by_key.get(pos) {
            Some(found) if found.id() == f.id => {
                self.recent.set(f.id, pos);
                Some(pos)
            }
            _ => self.find(f.id),
        }
    }

    /// The file with id `id`.
    pub fn get(&self, id: u64) -> Option<&FileView> {
        let pos = self.find(id)?;
        self.by_key.get(pos).map(visit_file)
    }

    /// The files with ids `ids`, each `None` if the run has no such file.
    /// Ids of consecutive files in key order (what a task names) cost one
    /// search for all: each next one is looked for right after the last.
    pub fn get_all<'a>(
        &'a self,
        ids: &'a [u64],
    ) -> impl Iterator<Item = Option<&'a FileView>> + 'a {
        let mut after = None;
        ids.iter().map(move |&id| {
            let pos = after
                .filter(|&p| self.by_key.get(p).is_some_and(|f| f.id() == id))
                .or_else(|| self.find(id))?;
            after = Some(self.by_key.next(pos));
            self.by_key.get(pos).map(visit_file)
        })
    }

    /// The first file whose smallest key is `smallest`.
    pub fn at(&self, smallest: &[u8]) -> Option<&FileView> {
        self.at_packed(&PackedKey::new(smallest))
    }

    /// [`Files::at`] for a packed key.
    pub(crate) fn at_packed(&self, smallest: &PackedKey) -> Option<&FileView> {
        search();
        let pos = self.by_key.partition_point(|s| s.0 < *smallest);
        let f = self.by_key.get(pos).filter(|f| f.smallest() == smallest)?;
        self.recent.set(f.id(), pos);
        Some(visit_file(f))
    }

    /// Files intersecting `[lo, hi]`, in key order. The files are sorted and
    /// disjoint: only the last file starting below `lo` can reach into the
    /// range, and every file starting within it is in it.
    pub fn overlapping<'a>(
        &'a self,
        lo: &[u8],
        hi: &[u8],
    ) -> impl DoubleEndedIterator<Item = &'a FileView> + Clone + 'a {
        self.overlapping_packed(PackedKey::new(lo), PackedKey::new(hi))
    }

    /// [`Files::overlapping`] for packed keys.
    pub(crate) fn overlapping_packed<'a>(
        &'a self,
        lo: PackedKey,
        hi: PackedKey,
    ) -> impl DoubleEndedIterator<Item = &'a FileView> + Clone + 'a {
        self.entries_overlapping(&lo, &hi).map(visit_file)
    }

    /// The key ranges and sizes of the files intersecting `[lo, hi]`, in
    /// key order, read from the blocks alone.
    pub(crate) fn spans_overlapping(
        &self,
        lo: &PackedKey,
        hi: &PackedKey,
    ) -> impl Iterator<Item = Span<'_>> + Clone {
        self.entries_overlapping(lo, hi).map(span)
    }

    /// Adds to each of `sums` the bytes and the number of this run's files
    /// intersecting the span beside it: `spans` are files of another run,
    /// in key order and disjoint. One walk over the files under them, each
    /// read once (a file reaching from one span into the next, twice).
    pub(crate) fn add_overlaps(&self, spans: &[Span<'_>], sums: &mut [Overlap]) {
        let Some(&(lo, _, _)) = spans.first() else {
            return;
        };
        search();
        // The last file starting below `lo` may reach into it.
        let from = self.by_key.partition_point(|s| s.0 < *lo);
        let from = self.by_key.prev(from).unwrap_or(from);
        let mut files = self.by_key.slices(from).flatten();
        let mut at = files.next();
        let mut read = u64::from(at.is_some());
        for (sum, &(lo, hi, _)) in sums.iter_mut().zip(spans) {
            while at.is_some_and(|f| f.largest < *lo) {
                at = files.next();
                read += 1;
            }
            while let Some(f) = at.filter(|f| f.smallest() <= hi) {
                sum.bytes += f.size;
                sum.files += 1;
                if f.largest > *hi {
                    // It may reach into the next span; every later file
                    // starts after it, beyond this span.
                    break;
                }
                at = files.next();
                read += 1;
            }
        }
        work::add_file_visits(read);
    }

    /// The key ranges and sizes of every file, in key order.
    pub(crate) fn spans(&self) -> impl Iterator<Item = Span<'_>> {
        self.by_key.iter().map(span)
    }

    fn entries_overlapping(
        &self,
        lo: &PackedKey,
        hi: &PackedKey,
    ) -> impl DoubleEndedIterator<Item = &Filed> + Clone {
        // One search for the first file starting at `lo` or later; the end
        // of the range, usually a few files on, is walked to (searched for
        // past a block's worth).
        search();
        let from = self.by_key.partition_point(|s| s.0 < *lo);
        let before = self
            .by_key
            .prev(from)
            .and_then(|p| Some((p, self.by_key.get(p)?)))
            .filter(|(_, f)| f.smallest() <= hi && f.largest >= *lo);
        // No file starts in an inverted range.
        let to = match lo <= hi {
            true => {
                let (to, searched) = self
                    .by_key
                    .partition_point_from(from, blocks::MAX, |s| s.0 <= *hi);
                if searched {
                    search();
                }
                to
            }
            false => from,
        };
        // The first file handed out, for the planner's lookup of the task
        // that names it.
        let first = before.map(|(p, f)| (p, f.id())).or_else(|| {
            (from < to)
                .then(|| Some((from, self.by_key.get(from)?.id())))
                .flatten()
        });
        if let Some((pos, id)) = first {
            self.recent.set(id, pos);
        }
        before
            .map(|(_, f)| f)
            .into_iter()
            .chain(self.by_key.range(from, to))
    }

    /// `n` consecutive files (fewer if the run has fewer) starting at
    /// `anchor`, a file of the run, or ending at the run's last file if the
    /// run ends first; empty if `anchor` is not in the run.
    pub fn window(&self, anchor: &FileView, n: usize) -> Vec<&FileView> {
        let Some(at) = self.find_file(anchor) else {
            return Vec::new();
        };
        let end = self.by_key.end();
        let mut window: Vec<&FileView> =
            self.by_key.range(at, end).take(n).map(visit_file).collect();
        let short = n.saturating_sub(window.len());
        let from = self.by_key.back(at, short);
        window.splice(0..0, self.by_key.range(from, at).map(visit_file));
        if let Some(first) = window.first() {
            self.recent.set(first.id, from);
        }
        window
    }

    /// Adds `file` (replacing a file with its id).
    pub fn insert(&mut self, file: FileView) {
        self.remove(file.id);
        let filed = Filed::new(visit(file), &mut Spare::default());
        self.totals.add(&filed.file);
        if let Some(map) = self.key_of.get_mut() {
            map.insert(filed.id(), filed.smallest().clone());
        }
        search();
        let pos = self
            .by_key
            .partition_point(|s| before(s, filed.smallest(), filed.id()));
        self.by_key.insert(pos, vec![filed]);
    }

    /// Adds `files`, in key order, with one search and one splice if they
    /// fit between two neighbours and are new to the run (the outputs of a
    /// merge, in the gap its inputs left); else one by one, as
    /// [`Files::insert`]. Whether they are new is read off the id map,
    /// built for it if need be, unless the caller knows (`known_new`: a
    /// merge's outputs are new files or files its inputs took out of their
    /// runs) or the run is empty; then only repeats among `files` count.
    fn insert_sorted(&mut self, files: Vec<FileView>, spare: &mut Spare, known_new: bool) {
        let filed: Vec<Filed> = files.into_iter().map(|f| Filed::new(f, spare)).collect();
        let (Some(first), Some(last)) = (filed.first(), filed.last()) else {
            return;
        };
        search();
        let pos = self
            .by_key
            .partition_point(|s| before(s, first.smallest(), first.id()));
        let gap = self
            .by_key
            .get(pos)
            .is_none_or(|next| !before(&next.slot, last.smallest(), last.id()))
            && filed
                .windows(2)
                .all(|w| before(&w[0].slot, w[1].smallest(), w[1].id()));
        if gap && !known_new && !self.is_empty() {
            self.id_map();
        }
        // Filing the ids finds any the run holds already; without a map,
        // a sort of the ids finds repeats among them.
        let mut filed_ids = 0;
        let new = gap
            && match self.key_of.get_mut() {
                Some(map) => filed.iter().all(|f| {
                    let old = map.insert(f.id(), f.smallest().clone());
                    if let Some(old) = old {
                        map.insert(f.id(), old);
                        return false;
                    }
                    filed_ids += 1;
                    true
                }),
                None => {
                    let mut ids: Vec<u64> = filed.iter().map(Filed::id).collect();
                    ids.sort_unstable();
                    ids.windows(2).all(|w| w[0] != w[1])
                }
            };
        if !new {
            if let Some(map) = self.key_of.get_mut() {
                for f in &filed[..filed_ids] {
                    map.remove(&f.id());
                }
            }
            for f in filed {
                self.insert(*f.file);
            }
            return;
        }
        for f in &filed {
            visit(f);
            self.totals.add(&f.file);
        }
        self.by_key.insert(pos, filed);
    }

    /// Adds `files`, in key order, none of whose ids the run holds (a
    /// merge's outputs: new files, or files its inputs took out of their
    /// runs), as [`Extend::extend`] does but without asking the id map
    /// whether they are new, in boxes from `spare` (see [`Spare`]).
    pub fn extend_from(&mut self, files: Vec<FileView>, spare: &mut Spare) {
        self.insert_sorted(files, spare, true);
    }

    /// `files` as a run, in boxes from `spare`.
    pub fn from_spare(files: Vec<FileView>, spare: &mut Spare) -> Files {
        let mut run = Files::new();
        run.extend_from(files, spare);
        run
    }

    /// Removes the file with id `id` and returns it.
    pub fn remove(&mut self, id: u64) -> Option<FileView> {
        let pos = self.find(id)?;
        if let Some(map) = self.key_of.get_mut() {
            map.remove(&id);
        }
        let file = *visit(self.by_key.take(pos)?).file;
        self.totals.remove(&file);
        Some(file)
    }

    /// Removes the files with ids `ids`, given in key order: one search and
    /// one splice if they are consecutive in the run (a merge's inputs);
    /// else one by one. Ids not in the run are skipped.
    pub fn remove_all(&mut self, ids: &[u64]) {
        let from = ids.first().and_then(|&id| self.find(id));
        self.remove_from(from, ids, &mut Spare::default());
    }

    /// Removes `files`, files of the run in key order as read from it, as
    /// [`Files::remove_all`] does, found by their keys (no id lookup), and
    /// keeps their boxes in `spare` (for [`Files::extend_from`]).
    pub fn take_all(&mut self, files: &[FileView], spare: &mut Spare) {
        let ids: Vec<u64> = files.iter().map(|f| f.id).collect();
        let from = files.first().and_then(|f| self.find_file(f));
        self.remove_from(from, &ids, spare);
    }

    /// Removes the files `ids`, the first of them at `from` (if the run has
    /// it): one splice if they are consecutive, else one by one.
    fn remove_from(&mut self, from: Option<Pos>, ids: &[u64], spare: &mut Spare) {
        let Some(from) = from else {
            ids.iter().for_each(|&id| drop(self.remove(id)));
            return;
        };
        let consecutive = self
            .by_key
            .range(from, self.by_key.end())
            .map(Filed::id)
            .take(ids.len())
            .eq(ids.iter().copied());
        if !consecutive {
            ids.iter().for_each(|&id| drop(self.remove(id)));
            return;
        }
        let mut to = from;
        for _ in ids {
            let f = self.by_key.get(to).map(visit);
            if let Some(f) = f {
                self.totals.remove(&f.file);
                if let Some(map) = self.key_of.get_mut() {
                    map.remove(&f.id());
                }
            }
            to = self.by_key.next(to);
        }
        self.by_key.remove_into(from, to, |f| spare.0.push(f.file));
    }

    /// Edits the file with id `id` in place (its key and size may change);
    /// false if the run has no such file.
    pub fn update(&mut self, id: u64, edit: impl FnOnce(&mut FileView)) -> bool {
        let Some(mut file) = self.remove(id) else {
            return false;
        };
        edit(&mut file);
        self.insert(file);
        true
    }
}

impl FromIterator<FileView> for Files {
    fn from_iter<I: IntoIterator<Item = FileView>>(files: I) -> Files {
        let mut run = Files::new();
        run.extend(files);
        run
    }
}

impl Extend<FileView> for Files {
    /// Adds the files as [`Files::insert`] does, with one splice for files
    /// in key order that fit between two neighbours.
    fn extend<I: IntoIterator<Item = FileView>>(&mut self, files: I) {
        self.insert_sorted(files.into_iter().collect(), &mut Spare::default(), false);
    }
}

impl From<Vec<FileView>> for Files {
    fn from(files: Vec<FileView>) -> Files {
        files.into_iter().collect()
    }
}

/// The files of a run in key order ([`Files::iter`]).
#[derive(Debug, Clone)]
pub struct Iter<'a>(Range<'a, Filed>);

impl<'a> Iterator for Iter<'a> {
    type Item = &'a FileView;

    fn next(&mut self) -> Option<&'a FileView> {
        self.0.next().map(visit_file)
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back().map(visit_file)
    }
}

impl<'a> IntoIterator for &'a Files {
    type Item = &'a FileView;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}
