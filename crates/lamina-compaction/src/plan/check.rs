//! The third step of [`plan`](super::plan): check that the task keeps the
//! tree's invariants — an existing output run holds no file in the merged
//! range that is not an input, and no two overlapping files change which
//! is newer.

use super::{invalid, PlannedInput, Positions};
use crate::{placement, CompactionTask, FileView, Result};

/// The input files of a plan: their ids (sorted) and the key range they
/// span.
pub(super) struct Merged<'a> {
    ids: Vec<u64>,
    /// The smallest key of the inputs.
    lo: &'a [u8],
    /// The largest key of the inputs.
    hi: &'a [u8],
}

impl<'a> Merged<'a> {
    pub(super) fn new(inputs: &'a [PlannedInput]) -> Merged<'a> {
        let mut ids: Vec<u64> = inputs
            .iter()
            .flat_map(|i| i.files.iter().map(|f| f.id))
            .collect();
        ids.sort_unstable();
        // The merged range: each input's files are sorted by key.
        let (mut lo, mut hi): (&[u8], &[u8]) = (&[], &[]);
        for (i, input) in inputs.iter().enumerate() {
            if let (Some(first), Some(last)) = (input.files.first(), input.files.last()) {
                if i == 0 || first.smallest.as_slice() < lo {
                    lo = &first.smallest;
                }
                if i == 0 || last.largest.as_slice() > hi {
                    hi = &last.largest;
                }
            }
        }
        Merged { ids, lo, hi }
    }

    /// True if file `id` is an input.
    pub(super) fn has(&self, id: u64) -> bool {
        self.ids.binary_search(&id).is_ok()
    }

    /// True if some file of an older run than the output (from position
    /// `older_from` on) that is not an input may hold a key of `f`.
    pub(super) fn older_may_hold(
        &self,
        positions: &Positions<'_>,
        older_from: usize,
        f: &FileView,
    ) -> bool {
        positions.iter().skip(older_from).any(|(_, run)| {
            run.overlapping(&f.smallest, &f.largest)
                .any(|o| !self.has(o.id) && o.may_share_keys(f))
        })
    }
}

/// Refuses an existing output run (at `dest`) with a file in the merged
/// range that is not an input.
pub(super) fn output_run(
    positions: &Positions<'_>,
    task: &CompactionTask,
    merged: &Merged<'_>,
    dest: usize,
) -> Result<()> {
    let run = positions[dest].1;
    match run
        .overlapping(merged.lo, merged.hi)
        .find(|f| !merged.has(f.id))
    {
        Some(f) => Err(invalid(
            task,
            format!(
                "output run {} has file {} in the merged range that is not an input",
                run.id, f.id
            ),
        )),
        None => Ok(()),
    }
}

/// Recency safety: for a non-input file at position q and an input file
/// it overlaps at position p, the input is newer before the task iff
/// p < q, and the output is newer afterwards iff it lands above q: in the
/// destination run itself (existing, d < q) or in a new run placed just
/// above the run now at d (d <= q). Only positions between the newest
/// input and the later of the oldest input and the destination can
/// disagree.
pub(super) fn recency(
    positions: &Positions<'_>,
    task: &CompactionTask,
    inputs: &[PlannedInput],
    merged: &Merged<'_>,
    dest: usize,
    into_existing: bool,
) -> Result<()> {
    let newest = inputs.first().map_or(0, |i| i.position);
    let last = inputs
        .iter()
        .map(|i| i.position)
        .max()
        .unwrap_or(newest)
        .max(dest);
    for (q, (_, run)) in positions
        .iter()
        .enumerate()
        .take(last.saturating_add(1))
        .skip(newest)
    {
        if into_existing && q == dest {
            continue;
        }
        // A run the task takes whole holds no file that is not an input.
        let whole = inputs
            .binary_search_by_key(&q, |i| i.position)
            .is_ok_and(|i| inputs[i].files.len() == run.files.len());
        if whole {
            continue;
        }
        let output_above = if into_existing { dest < q } else { dest <= q };
        // Two tiles of one level hold disjoint keys (what this check
        // proves of every tile it admits): nothing to order between them.
        let peer = |i: &PlannedInput| {
            i.level == positions[q].0
                && i.order == placement::TILE_RANK
                && run.order == placement::TILE_RANK
        };
        for input in inputs
            .iter()
            .filter(|i| i.position != q && (i.position < q) != output_above && !peer(i))
        {
            for f in &input.files {
                if let Some(other) = run
                    .overlapping(&f.smallest, &f.largest)
                    .find(|o| !merged.has(o.id) && o.may_share_keys(f))
                {
                    return Err(invalid(
                        task,
                        format!(
                            "it would reorder versions of keys shared by file {} and file {}",
                            f.id, other.id
                        ),
                    ));
                }
            }
        }
    }
    Ok(())
}
