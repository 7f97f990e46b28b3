//! Work per flush does not grow with the tree, so a simulation is linear in
//! its flushes. Two counters: the files the view's least-overlap index
//! ranks, rescores or visits (`TreeView::overlap_work`), and every file the
//! runs of the tree hand out or edit (`files::visits`: what policies, the
//! planner and `plan::apply` read and change). A policy that scanned every
//! file of a level at each pick, a planner that searched a run for its
//! input ids, or an apply that rebuilt or shifted a run would do about ten
//! times the work per flush once the tree holds ten times the files. Work
//! is counted, not timed. And the index picks what scoring every file picks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use lamina_compaction::files::visits;
use lamina_compaction::index::Below;
use lamina_compaction::{FileView, TreeView};
use lamina_sim::{ModelOptions, Simulator};

const UNIT: u64 = 1000;

fn opts() -> ModelOptions {
    ModelOptions {
        buffer_bytes: UNIT,
        ..ModelOptions::default()
    }
}

/// Index work and files visited per flush over the `window` flushes after
/// `warmup`.
fn work_per_flush(spec: &str, warmup: u64, window: u64) -> (f64, f64) {
    let mut sim = Simulator::from_spec(spec, opts()).unwrap();
    for _ in 0..warmup {
        sim.flush(UNIT).unwrap();
    }
    let before = (sim.view().overlap_work(), visits());
    for _ in 0..window {
        sim.flush(UNIT).unwrap();
    }
    let per_flush = |n: u64| n as f64 / window as f64;
    (
        per_flush(sim.view().overlap_work() - before.0),
        per_flush(visits() - before.1),
    )
}

fn files(view: &TreeView) -> usize {
    view.levels
        .iter()
        .flat_map(|l| &l.runs)
        .map(|r| r.files.len())
        .sum()
}

#[test]
fn work_per_flush_does_not_grow_with_the_tree() {
    let specs = [
        "leveling",
        "lo1",
        "1-leveling",
        "tiered",
        "lazy-leveling",
        "binomial:k=4",
    ];
    for spec in specs {
        let (small, small_visits) = work_per_flush(spec, 400, 200);
        let (large, large_visits) = work_per_flush(spec, 4000, 200);
        // The tree grew tenfold; allow a logarithmic factor and noise.
        assert!(
            large <= 2.0 * small + 20.0,
            "{spec}: {small:.1} files of index work per flush at 400 flushes, {large:.1} at 4000"
        );
        assert!(
            large_visits <= 2.0 * small_visits + 20.0,
            "{spec}: {small_visits:.1} files visited per flush at 400 flushes, \
             {large_visits:.1} at 4000"
        );
        assert!(small_visits > 0.0, "{spec}: the counter counts");
    }
    // The tree did grow: the bound above is not vacuous.
    let mut sim = Simulator::from_spec("leveling", opts()).unwrap();
    for _ in 0..4000 {
        sim.flush(UNIT).unwrap();
    }
    assert!(files(sim.view()) > 3000, "{}", files(sim.view()));
}

/// The file a full scan finds: least overlap per byte, ties in key order.
fn scan(view: &TreeView, level: usize, target: usize, below: Below) -> Option<u64> {
    let run = view.level(level).runs.first()?;
    let runs = &view.level(target).runs;
    let runs = match below {
        Below::Newest => &runs[..runs.len().min(1)],
        Below::All => &runs[..],
    };
    let score = |f: &FileView| {
        let bytes: u64 = runs
            .iter()
            .flat_map(|r| &r.files)
            .filter(|o| o.smallest <= f.largest && f.smallest <= o.largest)
            .map(|o| o.size)
            .sum();
        bytes as f64 / f.size.max(1) as f64
    };
    let mut best: Option<(f64, u64)> = None;
    for f in &run.files {
        let s = score(f);
        if best.is_none_or(|(b, _)| s < b) {
            best = Some((s, f.id));
        }
    }
    best.map(|(_, id)| id)
}

#[test]
fn the_index_picks_what_a_full_scan_picks() {
    for spec in ["leveling", "lo1", "lo2"] {
        let mut sim = Simulator::from_spec(
            spec,
            ModelOptions {
                dup_ratio: 0.3,
                ..opts()
            },
        )
        .unwrap();
        for flush in 0..1500 {
            sim.flush(UNIT + flush % 7 * 100).unwrap();
            let view = sim.view();
            for level in 0..view.levels.len() {
                for (target, below) in [(level + 1, Below::Newest), (level + 1, Below::All)] {
                    let Some(run) = view.level(level).runs.first() else {
                        continue;
                    };
                    let picked = view.by_least_overlap(level, run, target, below, |f| Some(f.id));
                    assert_eq!(
                        picked,
                        scan(view, level, target, below),
                        "{spec}, flush {flush}, level {level}"
                    );
                }
            }
        }
    }
}
