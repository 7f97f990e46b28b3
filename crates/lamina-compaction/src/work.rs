//! Work counters: per-thread counts of what the tree's containers and the
//! planner do, which tests bound instead of timing them (a scan of a whole
//! run, an id search, a shift of a vector shows up as work that grows with
//! the tree).
//!
//! | counter | counts | kept by |
//! | --- | --- | --- |
//! | [`file_visits`] | files a run handed out or edited | [`Files`](crate::Files) |
//! | [`searches`] | searches of a run's blocks from the top (lookups by id or key, range starts, inserts, removes); a walk over neighbours makes none | [`Files`](crate::Files) |
//! | [`id_maps`] | id → key maps a run built (a simulation's merges should build none) | [`Files`](crate::Files) |
//! | [`run_shifts`] | runs moved to make or close a gap in a level (not the room's doublings, which, like a `Vec`'s growth, move about one run per run added) | [`Runs`](crate::Runs) |
//! | [`id_checks`] | comparisons the planner made to find an input id named twice: one per id with a set, where a search of the ids resolved so far made one per pair | [`plan`](crate::plan) |
//! | [`buffer_visits`] | compaction-buffer slots read or edited | [`lsbm`](crate::lsbm) |
//!
//! A container of the crate must keep counting what it visits or moves and
//! where it searches. The counters only grow (wrapping); a test reads one
//! before and after the work it bounds.

use std::cell::Cell;

/// The counters, their readers and their (crate-private) adders.
macro_rules! counters {
    ($($(#[doc = $doc:literal])* $name:ident, $add:ident;)*) => {
        struct Counts {
            $($name: Cell<u64>,)*
        }

        thread_local! {
            static COUNTS: Counts = const { Counts { $($name: Cell::new(0),)* } };
        }

        $(
            $(#[doc = $doc])*
            pub fn $name() -> u64 {
                COUNTS.with(|c| c.$name.get())
            }

            pub(crate) fn $add(n: u64) {
                COUNTS.with(|c| c.$name.set(c.$name.get().wrapping_add(n)));
            }
        )*
    };
}

counters! {
    /// Files that runs of this thread have handed out or edited so far.
    file_visits, add_file_visits;
    /// Searches of runs' blocks from the top that runs of this thread have
    /// made so far: what a search per file costs beyond the files it visits.
    searches, add_searches;
    /// Id maps that runs of this thread have built so far.
    id_maps, add_id_maps;
    /// Runs moved on this thread so far to make or close a gap in a level.
    run_shifts, add_run_shifts;
    /// Comparisons the planner has made on this thread so far to find an
    /// input id named twice.
    id_checks, add_id_checks;
    /// Buffer slots that operations of this thread have read or edited so far.
    buffer_visits, add_buffer_visits;
}
