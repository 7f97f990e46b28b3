//! Spatial keys (seed 000 ch. 4): points, rectangles and the comparators
//! that order an LSM R-tree's records.
//!
//! AsterixDB recomputes a point's Hilbert value at every comparison. Here
//! each [`Comparator`] instead encodes ⟨point, id⟩ as a byte key whose
//! bytewise order is the comparator's order, so the engine sorts, merges
//! and seeks spatial keys like any other; [`Comparator::compare`] keeps the
//! seed's on-the-fly comparison for the sorting measurement
//! (`examples/spatial_sort.rs`). The layouts are in `docs/format.md`,
//! "Spatial keys".

mod comparator;

pub use comparator::{hilbert_index, Comparator};
pub use lamina_compaction::geometry::{Point, Rect};
