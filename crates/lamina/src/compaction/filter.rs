//! Which versions and range tombstones survive a merge: the per-key
//! [`VersionFilter`] and the tombstones a merge keeps or applies.

use crate::key::ValueKind;
use crate::range_del::{self, Fragments, RangeTombstone};

/// What older runs outside a merge may hold: a key, or any key of a range.
pub(super) struct Older<'a> {
    pub(super) may_hold: &'a (dyn Fn(&[u8]) -> bool + Sync),
    pub(super) may_overlap: &'a (dyn Fn(&[u8], &[u8]) -> bool + Sync),
}

/// The range tombstones of a merge's inputs: those that survive it (kept
/// while a snapshot may need them or older runs may hold keys they cover)
/// and, as fragments, those every snapshot sees, whose covered versions the
/// merge drops.
pub(super) fn merge_tombstones(
    all: Vec<RangeTombstone>,
    smallest_snapshot: u64,
    older_may_overlap: &dyn Fn(&[u8], &[u8]) -> bool,
) -> (Vec<RangeTombstone>, Fragments) {
    let hiding = Fragments::new(&all, smallest_snapshot);
    let mut kept: Vec<RangeTombstone> = all
        .into_iter()
        .filter(|t| t.seq > smallest_snapshot || older_may_overlap(&t.start, &t.end))
        .collect();
    range_del::sort(&mut kept);
    kept.dedup();
    (kept, hiding)
}

/// Decides which versions of each user key survive a merge.
pub(super) struct VersionFilter {
    pub(super) smallest_snapshot: u64,
    pub(super) current: Vec<u8>,
    pub(super) has_current: bool,
    pub(super) last_seq_for_key: u64,
}

impl VersionFilter {
    pub(super) fn new(smallest_snapshot: u64) -> Self {
        VersionFilter {
            smallest_snapshot,
            current: Vec::new(),
            has_current: false,
            last_seq_for_key: u64::MAX,
        }
    }

    /// Entries arrive in internal order (per key, newest first).
    pub(super) fn keep(
        &mut self,
        user_key: &[u8],
        seq: u64,
        kind: ValueKind,
        older_may_hold: &dyn Fn(&[u8]) -> bool,
    ) -> bool {
        if !self.has_current || self.current != user_key {
            self.current.clear();
            self.current.extend_from_slice(user_key);
            self.has_current = true;
            self.last_seq_for_key = u64::MAX;
        }
        // A newer version of this key is already visible to every snapshot.
        let shadowed = self.last_seq_for_key <= self.smallest_snapshot;
        self.last_seq_for_key = seq;
        if shadowed {
            return false;
        }
        !(kind == ValueKind::Delete && seq <= self.smallest_snapshot && !older_may_hold(user_key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_keeps_one_version_per_snapshot_stripe() {
        let never = |_: &[u8]| false;
        // No snapshots: smallest snapshot = latest seq 10.
        let mut f = VersionFilter::new(10);
        assert!(f.keep(b"a", 9, ValueKind::Put, &never));
        assert!(!f.keep(b"a", 5, ValueKind::Put, &never));
        // A tombstone with no older data anywhere goes.
        assert!(!f.keep(b"b", 8, ValueKind::Delete, &never));
        assert!(!f.keep(b"b", 3, ValueKind::Put, &never));
        // ...but stays if an older run may hold the key.
        let always = |_: &[u8]| true;
        assert!(f.keep(b"c", 8, ValueKind::Delete, &always));
        // A snapshot at 4 needs the version it sees.
        let mut f = VersionFilter::new(4);
        assert!(f.keep(b"a", 9, ValueKind::Put, &never));
        assert!(f.keep(b"a", 3, ValueKind::Put, &never));
        assert!(!f.keep(b"a", 2, ValueKind::Put, &never));
        // A tombstone newer than a snapshot must stay.
        assert!(f.keep(b"d", 6, ValueKind::Delete, &never));
        assert!(f.keep(b"d", 1, ValueKind::Put, &never));
    }
}
