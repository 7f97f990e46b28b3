//! A file as a run's blocks hold it: its keys packed ([`PackedKey`]), its
//! slot (smallest key, then id) and the boxed file.

use std::cmp::Ordering;

use super::visit;
use crate::view::blocks::Entry;
use crate::FileView;

/// A user key in a form that orders as its bytes do but compares its first
/// eight bytes as one integer (see the module docs).
#[derive(Debug, Clone, Default, Eq)]
pub struct PackedKey {
    /// The first eight bytes, big-endian, zero-padded: integers order as
    /// the bytes do, up to the padding.
    head: u64,
    /// The bytes after the eighth, if any, behind a thin pointer: a key is
    /// 24 bytes, not 32, and the blocks a merge splices and an overlap sum
    /// walks hold three of them per file.
    rest: Option<Box<Box<[u8]>>>,
    /// The key's length up to eight: of two keys of at most eight bytes
    /// equal up to the padding, the shorter is a prefix of the longer and
    /// comes first (longer keys differ in `rest`).
    len: u8,
}

impl PackedKey {
    /// Packs `key`.
    pub fn new(key: &[u8]) -> PackedKey {
        let mut head = [0u8; 8];
        let n = key.len().min(8);
        head[..n].copy_from_slice(&key[..n]);
        PackedKey {
            head: u64::from_be_bytes(head),
            rest: key
                .get(8..)
                .filter(|rest| !rest.is_empty())
                .map(|rest| Box::new(rest.into())),
            len: n as u8,
        }
    }

    /// The bytes after the eighth.
    fn rest(&self) -> &[u8] {
        self.rest.as_deref().map_or(&[], |rest| rest)
    }
}

impl Ord for PackedKey {
    /// By head, rest and length: the bytes' order (see the fields). Keys of
    /// at most eight bytes, the common case, never reach a `memcmp`.
    #[inline]
    fn cmp(&self, other: &Self) -> Ordering {
        match self.head.cmp(&other.head) {
            Ordering::Equal if self.rest.is_none() && other.rest.is_none() => {
                self.len.cmp(&other.len)
            }
            Ordering::Equal => self.rest().cmp(other.rest()).then(self.len.cmp(&other.len)),
            unequal => unequal,
        }
    }
}

impl PartialEq for PackedKey {
    /// As [`Ord`]: the heads and lengths first, the rest only if both
    /// have one.
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl PartialOrd for PackedKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A file's smallest and largest keys and its size.
pub(crate) type Span<'a> = (&'a PackedKey, &'a PackedKey, u64);

/// The files of a run intersecting a key range: their bytes and number.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Overlap {
    pub(crate) bytes: u64,
    pub(crate) files: u64,
}

pub(crate) fn span(filed: &Filed) -> Span<'_> {
    visit((filed.smallest(), &filed.largest, filed.size))
}

/// A file as a run keeps it: what searches and overlap sums read sits in
/// the block, in key order; the file itself is boxed, so that a splice
/// shifts a pointer, not a whole file.
#[derive(Debug, Clone)]
pub(crate) struct Filed {
    /// The smallest key, then the id, which breaks ties (the files of a run
    /// are disjoint, so only in a run that breaks that rule).
    pub(super) slot: Slot,
    pub(super) largest: PackedKey,
    pub(super) size: u64,
    pub(super) file: Box<FileView>,
}

impl Filed {
    /// `file` as a run keeps it, in a box from `spare` if it has one.
    pub(super) fn new(file: FileView, spare: &mut Spare) -> Filed {
        Filed {
            slot: (PackedKey::new(&file.smallest), file.id),
            largest: PackedKey::new(&file.largest),
            size: file.size,
            file: match spare.0.pop() {
                Some(mut boxed) => {
                    *boxed = file;
                    boxed
                }
                None => Box::new(file),
            },
        }
    }

    pub(super) fn smallest(&self) -> &PackedKey {
        &self.slot.0
    }

    pub(super) fn id(&self) -> u64 {
        self.slot.1
    }
}

/// The boxes of files an edit took out of runs, for the files it adds to
/// reuse ([`Files::take_all`](super::Files::take_all), [`Files::extend_from`](super::Files::extend_from)): a merge takes out
/// about as many files as it adds, and a fresh box per added file sent the
/// allocator searching its pages for free blocks (a tenth of a
/// simulation's time), where a used one is at hand.
#[derive(Debug, Default)]
// Boxes, not files: a box is what is reused.
#[expect(
    clippy::vec_box,
    reason = "the boxed entries keep their addresses while the vector grows"
)]
pub struct Spare(pub(super) Vec<Box<FileView>>);

/// Where a file sits in its run: its smallest key, then its id.
pub(super) type Slot = (PackedKey, u64);

/// True if `slot` sorts before `(smallest, id)`.
pub(super) fn before(slot: &Slot, smallest: &PackedKey, id: u64) -> bool {
    (&slot.0, slot.1) < (smallest, id)
}

impl Entry for Filed {
    type Key = Slot;
    fn key(&self) -> &Slot {
        &self.slot
    }
    type Summary = ();
    fn summarize(_: &[Filed]) {}
    fn add(_: &mut (), _: &[Filed]) {}
    fn keeps(_: &(), _: &[Filed]) -> bool {
        true
    }
}
