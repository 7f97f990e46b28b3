//! What a run keeps of its files as they come and go ([`Totals`]): byte and
//! tombstone sums, the greatest and least of the files' times, the files
//! by age.

use std::cmp::{Ordering, Reverse};
use std::collections::BTreeSet;
use std::sync::OnceLock;

use super::{Files, PackedKey};
use crate::{FileView, InlineKey};

/// The greatest value of a multiset (the least, for `Reverse` values) and
/// how many members hold it.
#[derive(Debug, Clone)]
pub(super) struct Extreme<T> {
    value: T,
    count: usize,
}

/// The greatest of one of the times of a run's files (the least, for
/// `Reverse` times), kept as files come and go while it is known: when
/// the last file holding it leaves, it is unknown until the next
/// [`Kept::get`] reads the files again. The round-robin, coldest and
/// oldest movement policies read these at every pick, and a level's
/// files all hold the same last read (the simulator reads nothing) or the
/// same oldest data far more often than they leave.
#[derive(Debug, Clone)]
pub(super) struct Kept<T>(OnceLock<Option<Extreme<T>>>);

impl<T> Default for Kept<T> {
    fn default() -> Self {
        Kept(OnceLock::new())
    }
}

/// One time of a file that a run keeps the greatest of (see [`Kept`]).
pub(super) struct Time<T> {
    /// How a file's time compares with a kept one, without making it.
    order: fn(&FileView, &T) -> Ordering,
    /// A file's time.
    of: fn(&FileView) -> T,
}

/// The arrival, then the largest key (its clone made only to be kept).
pub(super) const NEWEST: Time<(u64, InlineKey)> = Time {
    order: |f, n| (f.arrived_ms, &f.largest).cmp(&(n.0, &n.1)),
    of: |f| (f.arrived_ms, f.largest.clone()),
};
pub(super) const LEAST_READ: Time<Reverse<u64>> = Time {
    order: |f, t| Reverse(f.last_read_ms).cmp(t),
    of: |f| Reverse(f.last_read_ms),
};
pub(super) const MOST_READ: Time<u64> = Time {
    order: |f, t| f.last_read_ms.cmp(t),
    of: |f| f.last_read_ms,
};
pub(super) const LEAST_SEQ: Time<Reverse<u64>> = Time {
    order: |f, t| Reverse(f.smallest_seq).cmp(t),
    of: |f| Reverse(f.smallest_seq),
};
pub(super) const MOST_SEQ: Time<u64> = Time {
    order: |f, t| f.smallest_seq.cmp(t),
    of: |f| f.smallest_seq,
};

/// `f` joins the multiset whose greatest `time` is `greatest`.
fn join<T>(greatest: &mut Option<Extreme<T>>, f: &FileView, time: &Time<T>) {
    let first = |f| Extreme {
        value: (time.of)(f),
        count: 1,
    };
    match greatest {
        Some(x) => match (time.order)(f, &x.value) {
            Ordering::Less => {}
            Ordering::Equal => x.count += 1,
            Ordering::Greater => *x = first(f),
        },
        None => *greatest = Some(first(f)),
    }
}

impl<T> Kept<T> {
    /// `f` joined the run.
    fn add(&mut self, f: &FileView, time: &Time<T>) {
        if let Some(greatest) = self.0.get_mut() {
            join(greatest, f, time);
        }
    }

    /// `f` left the run.
    fn remove(&mut self, f: &FileView, time: &Time<T>) {
        let known = match self.0.get_mut() {
            Some(Some(x)) if (time.order)(f, &x.value) == Ordering::Equal => {
                x.count -= 1;
                x.count > 0
            }
            Some(Some(_)) => true,
            // Nothing to take a file out of: a run out of step.
            Some(None) | None => false,
        };
        if !known {
            self.0 = OnceLock::new();
        }
    }

    /// The greatest `time` of `files`, read off them if unknown.
    pub(super) fn get(&self, files: &Files, time: &Time<T>) -> Option<&T> {
        self.0
            .get_or_init(|| {
                let mut greatest = None;
                files.iter().for_each(|f| join(&mut greatest, f, time));
                greatest
            })
            .as_ref()
            .map(|x| &x.value)
    }
}

/// What a run keeps of its files as they come and go.
#[derive(Debug, Clone, Default)]
pub(super) struct Totals {
    pub(super) bytes: u64,
    pub(super) tombstones: u64,
    pub(super) busy: usize,
    /// The newest arrival, with the largest key among the files that
    /// arrived then (a round-robin cursor).
    pub(super) newest: Kept<(u64, InlineKey)>,
    pub(super) least_read: Kept<Reverse<u64>>,
    pub(super) most_read: Kept<u64>,
    pub(super) least_seq: Kept<Reverse<u64>>,
    pub(super) most_seq: Kept<u64>,
    /// The files by age: built by the first [`Files::by_age`], kept from
    /// then on (a run no policy asks keeps none).
    pub(super) by_age: OnceLock<Ages>,
}

/// Files by their oldest data (smallest sequence number), then key and
/// id: a stable sort by age of the files in key order.
pub(super) type Ages = BTreeSet<(u64, PackedKey, u64)>;

pub(super) fn age(f: &FileView) -> (u64, PackedKey, u64) {
    (f.smallest_seq, PackedKey::new(&f.smallest), f.id)
}

impl Totals {
    pub(super) fn add(&mut self, f: &FileView) {
        self.bytes += f.size;
        self.tombstones += f.tombstones;
        self.busy += usize::from(f.busy);
        self.newest.add(f, &NEWEST);
        self.least_read.add(f, &LEAST_READ);
        self.most_read.add(f, &MOST_READ);
        self.least_seq.add(f, &LEAST_SEQ);
        self.most_seq.add(f, &MOST_SEQ);
        if let Some(ages) = self.by_age.get_mut() {
            ages.insert(age(f));
        }
    }

    pub(super) fn remove(&mut self, f: &FileView) {
        self.bytes -= f.size;
        self.tombstones -= f.tombstones;
        self.busy -= usize::from(f.busy);
        self.newest.remove(f, &NEWEST);
        self.least_read.remove(f, &LEAST_READ);
        self.most_read.remove(f, &MOST_READ);
        self.least_seq.remove(f, &LEAST_SEQ);
        self.most_seq.remove(f, &MOST_SEQ);
        if let Some(ages) = self.by_age.get_mut() {
            ages.remove(&age(f));
        }
    }
}
