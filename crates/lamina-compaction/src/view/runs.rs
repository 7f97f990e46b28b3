//! A level's runs, newest first, with room kept before the newest.
//!
//! A flush puts its run in front of every other run of level 0. In a
//! `Vec` that shifted every run of the level, about 300 bytes each, per
//! flush: a level that keeps every flush as a run of its own (`nomerge`,
//! a stack before its first merge) made a simulation quadratic in its
//! flushes (4·10^4 flushes of `nomerge` spent 93% of their time moving
//! runs). [`Runs`] keeps empty placeholder runs in front of the newest one
//! (doubling their number when they run out, as a `Vec` does its capacity
//! at the back), so a new newest run takes a placeholder's place, and an
//! insert or removal shifts the runs on its shorter side. It reads as a
//! slice of the runs (`Deref`).

use std::ops::{Deref, DerefMut};

use crate::{Files, RunView};

fn shifted(n: usize) {
    crate::work::add_run_shifts(n as u64);
}

/// A run that holds no files and allocates nothing: the room before the
/// newest run.
fn placeholder() -> RunView {
    RunView {
        id: 0,
        order: 0,
        files: Files::new(),
    }
}

/// The runs of a level, newest first; see the module docs.
#[derive(Clone, Default)]
pub struct Runs {
    /// `room` placeholders, then the runs.
    slots: Vec<RunView>,
    room: usize,
}

impl Runs {
    /// No runs.
    pub const fn new() -> Runs {
        Runs {
            slots: Vec::new(),
            room: 0,
        }
    }

    /// The runs as a slice.
    pub fn as_slice(&self) -> &[RunView] {
        self.slots.get(self.room..).unwrap_or_default()
    }

    /// Inserts `run` at position `at` (at the end if `at` is past it),
    /// shifting the runs before it (into the room in front) or after it,
    /// whichever are fewer.
    pub fn insert(&mut self, at: usize, run: RunView) {
        let len = self.len();
        let at = at.min(len);
        if at > len / 2 {
            shifted(len - at);
            self.slots.insert(self.room + at, run);
            return;
        }
        if self.room == 0 {
            self.grow();
        }
        self.room -= 1;
        self.slots[self.room] = run;
        shifted(at);
        self.slots[self.room..=self.room + at].rotate_left(1);
    }

    /// Inserts `runs` at position `at`, in their order.
    pub fn insert_all(&mut self, at: usize, runs: impl IntoIterator<Item = RunView>) {
        let at = self.room + at.min(self.len());
        shifted(self.slots.len() - at);
        self.slots.splice(at..at, runs);
    }

    /// Appends `run` as the oldest.
    pub fn push(&mut self, run: RunView) {
        self.slots.push(run);
    }

    /// Removes the oldest run.
    pub fn pop(&mut self) -> Option<RunView> {
        if self.is_empty() {
            return None;
        }
        self.slots.pop()
    }

    /// Removes and returns the run at `at` (none if there is none),
    /// shifting the runs on its shorter side.
    pub fn remove(&mut self, at: usize) -> Option<RunView> {
        let len = self.len();
        if at >= len {
            return None;
        }
        if at >= len / 2 {
            shifted(len - at - 1);
            return Some(self.slots.remove(self.room + at));
        }
        shifted(at);
        self.slots[self.room..=self.room + at].rotate_right(1);
        let run = std::mem::replace(&mut self.slots[self.room], placeholder());
        self.room += 1;
        Some(run)
    }

    /// Keeps the runs `keep` accepts, in order. The kept runs on the
    /// shorter side of the dropped ones move: toward the front over them
    /// (the room at the back is freed), or toward the back (the dropped
    /// runs become room in front). A stack merge drops the newest runs, so
    /// the older ones stay where they are; a tiered merge of the oldest
    /// runs leaves the newer ones. `keep` must answer the same for a run
    /// every time it is asked.
    pub fn retain(&mut self, keep: impl Fn(&RunView) -> bool) {
        let (room, end) = (self.room, self.slots.len());
        let dropped = |i: &usize| !keep(&self.slots[*i]);
        let (Some(first), Some(last)) =
            ((room..end).find(dropped), (room..end).rev().find(dropped))
        else {
            return;
        };
        let kept_after = (first..end).filter(|i| !dropped(i)).count();
        let kept_before = (room..last).filter(|i| !dropped(i)).count();
        if kept_after <= kept_before {
            // [kept, read) holds only dropped runs.
            let mut kept = first;
            for read in first..end {
                if keep(&self.slots[read]) {
                    shifted(1);
                    self.slots.swap(kept, read);
                    kept += 1;
                }
            }
            self.slots.truncate(kept);
        } else {
            // (read, kept) holds only dropped runs.
            let mut kept = last + 1;
            for read in (room..=last).rev() {
                if keep(&self.slots[read]) {
                    kept -= 1;
                    shifted(1);
                    self.slots.swap(kept, read);
                }
            }
            for slot in &mut self.slots[room..kept] {
                *slot = placeholder();
            }
            self.room = kept;
        }
    }

    /// Room in front for as many runs as there are (at least four).
    fn grow(&mut self) {
        let room = self.len().max(4);
        let mut slots = Vec::with_capacity(room + self.slots.len());
        slots.extend(std::iter::repeat_with(placeholder).take(room));
        slots.extend(self.slots.drain(self.room..));
        self.slots = slots;
        self.room = room;
    }
}

impl Deref for Runs {
    type Target = [RunView];
    fn deref(&self) -> &[RunView] {
        self.as_slice()
    }
}

impl DerefMut for Runs {
    fn deref_mut(&mut self) -> &mut [RunView] {
        let room = self.room;
        self.slots.get_mut(room..).unwrap_or_default()
    }
}

impl std::fmt::Debug for Runs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl From<Vec<RunView>> for Runs {
    fn from(slots: Vec<RunView>) -> Runs {
        Runs { slots, room: 0 }
    }
}

impl FromIterator<RunView> for Runs {
    fn from_iter<I: IntoIterator<Item = RunView>>(runs: I) -> Runs {
        Runs::from(runs.into_iter().collect::<Vec<_>>())
    }
}

impl<'a> IntoIterator for &'a Runs {
    type Item = &'a RunView;
    type IntoIter = std::slice::Iter<'a, RunView>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<'a> IntoIterator for &'a mut Runs {
    type Item = &'a mut RunView;
    type IntoIter = std::slice::IterMut<'a, RunView>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter_mut()
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use proptest::prelude::*;

    fn run(id: u64) -> RunView {
        RunView {
            id,
            order: id,
            files: Files::new(),
        }
    }

    fn ids(runs: &Runs) -> Vec<u64> {
        runs.iter().map(|r| r.id).collect()
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(usize),
        InsertAll(usize, u8),
        Push,
        Pop,
        Remove(usize),
        Retain(u8),
        /// Drops the `n` newest runs (a stack merge's inputs).
        DropNewest(usize),
        /// Drops the `n` oldest runs (a tiered merge's inputs).
        DropOldest(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0usize..40).prop_map(Op::Insert),
            1 => (0usize..40, 0u8..4).prop_map(|(a, n)| Op::InsertAll(a, n)),
            1 => Just(Op::Push),
            1 => Just(Op::Pop),
            2 => (0usize..40).prop_map(Op::Remove),
            1 => (2u8..5).prop_map(Op::Retain),
            1 => (0usize..6).prop_map(Op::DropNewest),
            1 => (0usize..6).prop_map(Op::DropOldest),
        ]
    }

    proptest! {
        /// Every edit leaves the same runs, in the same order, as the same
        /// edit of a `Vec`.
        #[test]
        fn runs_match_a_vec(ops in proptest::collection::vec(op(), 1..200)) {
            let mut runs = Runs::new();
            let mut model: Vec<u64> = Vec::new();
            let mut next = 0;
            for op in ops {
                next += 1;
                match op {
                    Op::Insert(at) => {
                        let at = at.min(model.len());
                        runs.insert(at, run(next));
                        model.insert(at, next);
                    }
                    Op::InsertAll(at, n) => {
                        let at = at.min(model.len());
                        // Ids stay unique, so that dropping runs by id drops them by place.
                        let new: Vec<u64> = (0..u64::from(n)).map(|k| 1_000_000 + next * 10 + k).collect();
                        runs.insert_all(at, new.iter().map(|&id| run(id)));
                        model.splice(at..at, new);
                    }
                    Op::Push => {
                        runs.push(run(next));
                        model.push(next);
                    }
                    Op::Pop => {
                        prop_assert_eq!(runs.pop().map(|r| r.id), model.pop());
                    }
                    Op::Remove(at) if !model.is_empty() => {
                        let at = at % model.len();
                        prop_assert_eq!(runs.remove(at).map(|r| r.id), Some(model.remove(at)));
                    }
                    Op::Remove(at) => prop_assert!(runs.remove(at).is_none()),
                    Op::Retain(m) => {
                        runs.retain(|r| r.id % u64::from(m) != 0);
                        model.retain(|id| id % u64::from(m) != 0);
                    }
                    Op::DropNewest(n) | Op::DropOldest(n) => {
                        let n = n.min(model.len());
                        let gone: Vec<u64> = match op {
                            Op::DropNewest(_) => model.drain(..n).collect(),
                            _ => model.drain(model.len() - n..).collect(),
                        };
                        runs.retain(|r| !gone.contains(&r.id));
                    }
                }
                prop_assert_eq!(ids(&runs), model.clone());
                prop_assert_eq!(runs.len(), model.len());
            }
        }
    }

    /// A run put in front of the others moves none of them (a `Vec` moved
    /// them all: 5·10^7 moves for these 10^4 inserts).
    #[test]
    fn a_newest_run_moves_no_other() {
        let mut runs = Runs::new();
        let before = crate::work::run_shifts();
        for id in 0..10_000 {
            runs.insert(0, run(id));
        }
        assert_eq!(crate::work::run_shifts() - before, 0);
        assert_eq!(runs.first().map(|r| r.id), Some(9_999));
        assert_eq!(runs.last().map(|r| r.id), Some(0));
    }
}
