//! [`Cursor`]: the one user-facing iterator. Every read of a range goes
//! through it: `Db::iter`, `Db::prefix_iter`, the `scan`/`scan_rev`
//! adapters and window queries.
//!
//! It turns the merged stream of internal entries (every version of every
//! key, newest first per key) into the live keys at a snapshot: versions
//! newer than the snapshot are skipped, a key's newest visible version
//! decides it, and a point tombstone or a visible range tombstone newer
//! than that version hides it. LevelDB's `DBIter` shape:
//!
//! * Moving forward, the merged iterator sits on the entry that decided the
//!   current key, so `value()` borrows from it (a cached block or the
//!   memtable iterator's batch); the key is copied into a buffer the cursor
//!   reuses, which is also the key the next step skips past (cheaper than
//!   asking the merged iterator's children for it again).
//! * Moving backward, a key is decided only after all its versions have
//!   been passed (they come oldest first), so the merged iterator sits just
//!   before them and the current key and value are copied into two buffers
//!   the cursor reuses.
//!
//! A change of direction first walks the merged iterator over the current
//! key's versions to restore the other mode's position.

use super::*;
use crate::key::user_key;
use crate::range_del::Fragments;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Backward,
}

/// A double-ended cursor over the live keys of the database at one
/// sequence number (the time it was made, or a snapshot's), optionally
/// bounded by `[lower, upper)`. A new cursor is not positioned: call one of
/// the seeks. `next` and `prev` on an invalid cursor do nothing; after
/// running off either end, seek again. An error leaves it invalid.
///
/// `key()` and `value()` borrow from the cursor and are only meaningful
/// while `valid()`. The cursor pins the memtables and files it started on,
/// so it reads a fixed view however long it lives.
pub struct Cursor {
    merged: MergingIterator,
    seq: u64,
    ranges: Fragments,
    /// Inclusive lower bound on user keys.
    lower: Option<Vec<u8>>,
    /// Exclusive upper bound on user keys.
    upper: Option<Vec<u8>>,
    direction: Direction,
    valid: bool,
    /// The current key; moving forward, also the key whose older
    /// versions are skipped.
    saved_key: Vec<u8>,
    /// Backward: the current value.
    saved_value: Vec<u8>,
    _sv: Arc<SuperVersion>,
}

impl std::fmt::Debug for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cursor")
            .field("seq", &self.seq)
            .field("valid", &self.valid)
            .finish()
    }
}

/// The merged iterator's current entry, parsed (a free function, so the
/// parts borrow only the merged iterator and the cursor's buffers stay
/// writable).
fn parse(merged: &MergingIterator) -> Result<crate::key::ParsedKey<'_>> {
    parse_internal_key(merged.key())
        .ok_or_else(|| Error::corruption("scan", 0, "malformed internal key"))
}

impl Cursor {
    pub(super) fn new(
        merged: MergingIterator,
        seq: u64,
        ranges: Fragments,
        lower: Option<Vec<u8>>,
        upper: Option<Vec<u8>>,
        sv: Arc<SuperVersion>,
    ) -> Self {
        Cursor {
            merged,
            seq,
            ranges,
            lower,
            upper,
            direction: Direction::Forward,
            valid: false,
            saved_key: Vec::new(),
            saved_value: Vec::new(),
            _sv: sv,
        }
    }

    /// True while the cursor is on a live key.
    #[inline]
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// The current key (empty when invalid).
    #[inline]
    pub fn key(&self) -> &[u8] {
        if self.valid {
            &self.saved_key
        } else {
            &[]
        }
    }

    /// The current value (empty when invalid).
    #[inline]
    pub fn value(&self) -> &[u8] {
        match (self.valid, self.direction) {
            (false, _) => &[],
            (true, Direction::Forward) => self.merged.value(),
            (true, Direction::Backward) => &self.saved_value,
        }
    }

    /// The sequence number the cursor reads at.
    pub fn sequence(&self) -> u64 {
        self.seq
    }

    /// Positions at the first live key `>= key` (and within the bounds).
    pub fn seek(&mut self, key: &[u8]) -> Result<()> {
        let target = match &self.lower {
            Some(l) if key < l.as_slice() => seek_key(l, self.seq),
            _ => seek_key(key, self.seq),
        };
        self.direction = Direction::Forward;
        let res = self.merged.seek(&target);
        self.guard(res)?;
        let res = self.find_next(false);
        self.guard(res)
    }

    /// Positions at the last live key `<= key` (and within the bounds).
    pub fn seek_for_prev(&mut self, key: &[u8]) -> Result<()> {
        if self.upper.as_deref().is_some_and(|u| key >= u) {
            return self.seek_to_last();
        }
        self.direction = Direction::Backward;
        // The oldest possible version of `key` sorts after all its others.
        let res = self
            .merged
            .seek_for_prev(&make_internal_key(key, 0, ValueKind::Delete));
        self.guard(res)?;
        let res = self.find_prev();
        self.guard(res)
    }

    /// Positions at the first live key within the bounds.
    pub fn seek_to_first(&mut self) -> Result<()> {
        match self.lower.clone() {
            Some(l) => self.seek(&l),
            None => {
                self.direction = Direction::Forward;
                let res = self.merged.seek_to_first();
                self.guard(res)?;
                let res = self.find_next(false);
                self.guard(res)
            }
        }
    }

    /// Positions at the last live key within the bounds.
    pub fn seek_to_last(&mut self) -> Result<()> {
        self.direction = Direction::Backward;
        let res = match &self.upper {
            // Before every version of the bound itself.
            Some(u) => self.merged.seek_for_prev(&seek_key(u, MAX_SEQ)),
            None => self.merged.seek_to_last(),
        };
        self.guard(res)?;
        let res = self.find_prev();
        self.guard(res)
    }

    /// Moves to the next live key.
    // Not `Iterator::next`: a cursor's items borrow from it, which
    // `Iterator` cannot express; `Db::scan` is the iterator.
    #[expect(
        clippy::should_implement_trait,
        reason = "a cursor's `next` returns a borrowed entry, which `Iterator` cannot express"
    )]
    #[inline]
    pub fn next(&mut self) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        let res = self.step_next();
        self.guard(res)
    }

    /// Moves to the previous live key.
    pub fn prev(&mut self) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        let res = self.step_prev();
        self.guard(res)
    }

    /// An error leaves the cursor invalid.
    fn guard(&mut self, res: Result<()>) -> Result<()> {
        if res.is_err() {
            self.valid = false;
        }
        res
    }

    #[inline]
    fn step_next(&mut self) -> Result<()> {
        if self.direction == Direction::Backward {
            // The merged iterator is just before the current key's
            // versions: step into them; `saved_key` holds the key to skip.
            self.direction = Direction::Forward;
            if self.merged.valid() {
                self.merged.next()?;
            } else {
                self.merged.seek_to_first()?;
            }
        } else {
            // `saved_key` holds the current key: skip its older versions.
            self.merged.next()?;
        }
        self.find_next(true)
    }

    fn step_prev(&mut self) -> Result<()> {
        if self.direction == Direction::Forward {
            // The merged iterator is on the current key's deciding
            // version (the key is in `saved_key`): back off past all its
            // versions.
            loop {
                self.merged.prev()?;
                if !self.merged.valid() || user_key(self.merged.key()) < self.saved_key.as_slice() {
                    break;
                }
            }
            self.direction = Direction::Backward;
        }
        self.find_prev()
    }

    /// Forward from the merged iterator's position to the first entry that
    /// decides a live key; with `skipping`, the versions of keys up to
    /// `saved_key` are hidden (already passed, or deleted).
    #[inline]
    fn find_next(&mut self, mut skipping: bool) -> Result<()> {
        while self.merged.valid() {
            let p = parse(&self.merged)?;
            if self.upper.as_deref().is_some_and(|u| p.user_key >= u) {
                break;
            }
            if p.seq <= self.seq {
                let hidden = skipping && p.user_key <= self.saved_key.as_slice();
                if !hidden {
                    let live = p.kind == ValueKind::Put && !self.ranges.covers(p.user_key, p.seq);
                    // Live: the current key. Deleted: its older versions
                    // are hidden too.
                    self.saved_key.clear();
                    self.saved_key.extend_from_slice(p.user_key);
                    if live {
                        self.valid = true;
                        return Ok(());
                    }
                    skipping = true;
                }
            }
            self.merged.next()?;
        }
        self.valid = false;
        Ok(())
    }

    /// Backward from the merged iterator's position: the versions of a key
    /// come oldest first, so the newest visible one met before the key
    /// changes decides it; stops once a live key is decided, leaving the
    /// merged iterator just before that key's versions.
    fn find_prev(&mut self) -> Result<()> {
        let mut live = false;
        while self.merged.valid() {
            let p = parse(&self.merged)?;
            if self.lower.as_deref().is_some_and(|l| p.user_key < l) {
                break;
            }
            if p.seq <= self.seq {
                if live && p.user_key < self.saved_key.as_slice() {
                    break;
                }
                live = p.kind == ValueKind::Put && !self.ranges.covers(p.user_key, p.seq);
                if live {
                    self.saved_key.clear();
                    self.saved_key.extend_from_slice(p.user_key);
                    self.saved_value.clear();
                    self.saved_value.extend_from_slice(self.merged.value());
                }
            }
            self.merged.prev()?;
        }
        self.valid = live;
        if !live {
            self.saved_key.clear();
            self.saved_value.clear();
            self.direction = Direction::Forward;
        }
        Ok(())
    }
}
