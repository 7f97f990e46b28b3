//! Work per flush does not grow with the tree, so a simulation is linear in
//! its flushes. Four counters: the files the view's least-overlap index
//! ranks, rescores or visits (`TreeView::overlap_work`), every file the
//! runs of the tree hand out or edit (`work::file_visits`: what policies, the
//! planner and `plan::apply` read and change), every slot of LSbM's
//! compaction buffers read or edited (`work::buffer_visits`), and every run a
//! level's runs move to make or close a gap (`work::run_shifts`). A policy that
//! scanned every file of a level at each pick, a planner that searched a
//! run for its input ids, an apply that rebuilt or shifted a run, a buffer
//! that scanned or sorted all its files at each step, or a flush that
//! shifted every run of level 0 would do about ten times the work per
//! flush once the tree holds ten times the files or runs.
//! Work is counted, not timed. And the index picks what scoring every file
//! picks.
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use lamina_compaction::view::index::Below;
use lamina_compaction::work::{buffer_visits, file_visits, id_maps, run_shifts};
use lamina_compaction::{
    policy_from_spec, CompactionPolicy, CompactionTask, FileView, PolicyDefaults, TreeView,
};
use lamina_sim::{cut_work, KeyModel, ModelOptions, Simulator};

const UNIT: u64 = 1000;

fn opts() -> ModelOptions {
    ModelOptions {
        buffer_bytes: UNIT,
        ..ModelOptions::default()
    }
}

/// Work per flush over the `window` flushes after `warmup`.
#[derive(Debug, Clone, Copy)]
struct Work {
    /// Files of index work.
    index: f64,
    /// Files of runs visited.
    files: f64,
    /// Slots of compaction buffers visited.
    buffer: f64,
    /// Runs shifted.
    shifts: f64,
    /// Id maps built over the whole simulation (not per flush).
    id_maps: u64,
    /// Levels of the tree after the window.
    levels: usize,
}

fn work_per_flush(spec: &str, warmup: u64, window: u64) -> Work {
    work_per_flush_with(spec, KeyModel::Uniform, warmup, window)
}

fn work_per_flush_with(spec: &str, keys: KeyModel, warmup: u64, window: u64) -> Work {
    let maps_before = id_maps();
    let options = ModelOptions { keys, ..opts() };
    let mut sim = Simulator::from_spec(spec, options).unwrap();
    for _ in 0..warmup {
        sim.flush(UNIT).unwrap();
    }
    let before = (
        sim.view().overlap_work(),
        file_visits(),
        buffer_visits(),
        run_shifts(),
    );
    for _ in 0..window {
        sim.flush(UNIT).unwrap();
    }
    let per_flush = |n: u64| n as f64 / window as f64;
    Work {
        index: per_flush(sim.view().overlap_work() - before.0),
        files: per_flush(file_visits() - before.1),
        buffer: per_flush(buffer_visits() - before.2),
        shifts: per_flush(run_shifts() - before.3),
        id_maps: id_maps() - maps_before,
        levels: sim.view().levels.len(),
    }
}

/// `lo2` scores a level's files against the level two below, whose files
/// are about T² times smaller: each file a merge writes into a level
/// with a grandparent, or into a grandparent, costs a walk over the
/// grandparent's files under it. That is work per level, so per flush it
/// grows with the levels that have a grandparent (a logarithmic factor:
/// 1,248.5 files visited per flush at 400 flushes with one such level,
/// 3,082.8 at 4,000 with two, 4,401.1 at 40,000 with three), and per such
/// level it does not grow with the tree: 1,248.5 and 1,541.4 at 400 and
/// 4,000 flushes. The bound is tight because the model is deterministic:
/// listing the files of the level without a grandparent at each of its
/// picks (which `lo2` once did, to learn that it has no opinion there)
/// makes those 1,348.5 and 2,041.4, and fails it.
#[test]
fn lo2_work_grows_only_with_the_levels_that_have_a_grandparent() {
    let per_level = |warmup| {
        let work = work_per_flush("lo2", warmup, 200);
        assert!(
            work.levels >= 3,
            "{} levels after {warmup} flushes",
            work.levels
        );
        let with_grandparent = (work.levels - 2) as f64;
        (work.index / with_grandparent, work.files / with_grandparent)
    };
    let (small, small_visits) = per_level(400);
    let (large, large_visits) = per_level(4000);
    assert!(
        large <= 1.4 * small,
        "{small:.1} files of index work per flush and level at 400 flushes, {large:.1} at 4000"
    );
    assert!(
        large_visits <= 1.4 * small_visits,
        "{small_visits:.1} files visited per flush and level at 400 flushes, \
         {large_visits:.1} at 4000"
    );
}

/// Cutting a merge's output at BINARYSPLIT's bounds (`partition=local`
/// or `global`, seed 000 ch. 5) estimates the bytes in about two key
/// ranges per file it cuts. Each estimate read every piece of the merge's
/// input, which made a merge quadratic in its files (`binomial:k=4,
/// partition=local`: 305.7 pieces read per file cut at 400 flushes, 3,075.2
/// at 4,000; now 14.5 and 17.6); it reads the pieces the range meets.
#[test]
fn cutting_at_binarysplit_bounds_reads_the_pieces_a_range_meets() {
    for spec in [
        "binomial:k=4,partition=local",
        "binomial:k=4,partition=global",
        "tiered:b=4,partition=local",
        "bigtable:k=4,partition=local,image=be",
    ] {
        let per_file = |flushes| {
            let before = cut_work();
            let mut sim = Simulator::from_spec(spec, opts()).unwrap();
            for _ in 0..flushes {
                sim.flush(UNIT).unwrap();
            }
            let after = cut_work();
            let files = after.files_cut - before.files_cut;
            assert!(files > 0, "{spec}: no file cut");
            (after.pieces_read - before.pieces_read) as f64 / files as f64
        };
        let (small, large) = (per_file(400), per_file(4000));
        eprintln!("{spec}: {small:.1} pieces read per file cut at 400 flushes, {large:.1} at 4000");
        assert!(
            large <= 2.0 * small + 20.0,
            "{spec}: {small:.1} pieces read per file cut at 400 flushes, {large:.1} at 4000"
        );
    }
}

/// Partitioned merges (seed 000 ch. 5) cut a stack's runs into files of
/// θ bytes, so a merge writes and reads as many files as its bytes fill,
/// and a bounded-depth policy's write amplification grows with the tree
/// (about ×1.8 between these windows). Anything else that reads every
/// file of every run at each pick shows on top: the stack's busy flags
/// read that way made 916.8 files visited per flush at 400 flushes and
/// 7,555.2 at 4,000 (`binomial:k=4,partition=size`); now 52.6 and 96.8.
/// The windows are as long as the warm-ups: these stacks' largest merges
/// are rare and large.
#[test]
fn partitioned_stacks_visit_the_files_their_merges_move() {
    for spec in [
        "binomial:k=4,partition=size",
        "binomial:k=4,partition=local",
        "tiered:b=4,partition=size",
        "tiered:b=4,partition=global",
        "concurrent:partition=size",
    ] {
        let small = work_per_flush(spec, 400, 400);
        let large = work_per_flush(spec, 4000, 4000);
        eprintln!("{spec}: {small:?} per flush at 400 flushes, {large:?} at 4000");
        assert!(
            large.files <= 2.0 * small.files + 20.0,
            "{spec}: {:.1} files visited per flush at 400 flushes, {:.1} at 4000",
            small.files,
            large.files
        );
        assert_eq!(large.id_maps, 0, "{spec}: id maps built");
    }
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
    for spec in SPECS {
        check_work_per_flush(spec, KeyModel::Uniform);
    }
    // The tree did grow: the bound above is not vacuous.
    let mut sim = Simulator::from_spec("leveling", opts()).unwrap();
    for _ in 0..4000 {
        sim.flush(UNIT).unwrap();
    }
    assert!(files(sim.view()) > 3000, "{}", files(sim.view()));
}

/// With sequential keys every flush lands beyond the last, merges are
/// trivial moves and no two files of a level hold data of the same age:
/// `old` sorted a level's files by age at each pick (237 files visited
/// per flush at 400 flushes, 2,241 at 4,000; now 21 and 27), where with
/// random keys every file of a level ties and it has no opinion.
#[test]
fn work_per_flush_does_not_grow_with_the_tree_under_sequential_keys() {
    for spec in SPECS {
        check_work_per_flush(spec, KeyModel::Sequential);
    }
}

fn check_work_per_flush(spec: &str, keys: KeyModel) {
    let small = work_per_flush_with(spec, keys, 400, 200);
    let large = work_per_flush_with(spec, keys, 4000, 200);
    eprintln!("{spec} ({keys:?}): {small:?} per flush at 400 flushes, {large:?} at 4000");
    // The tree grew tenfold; allow a logarithmic factor and noise.
    for (what, small, large) in [
        ("files of index work", small.index, large.index),
        ("files visited", small.files, large.files),
        ("buffer slots visited", small.buffer, large.buffer),
        ("runs shifted", small.shifts, large.shifts),
    ] {
        assert!(
            large <= 2.0 * small + 20.0,
            "{spec} ({keys:?}): {small:.1} {what} per flush at 400 flushes, {large:.1} at 4000"
        );
    }
    assert!(small.files > 0.0, "{spec}: the counter counts");
    // The planner finds a task's inputs where the policy's search left
    // them (`Files`' recent position, or a run's first file), and the
    // edit by key: no run needs its id map, a hash insert and remove
    // per file written.
    assert_eq!(large.id_maps, 0, "{spec}: id maps built");
    assert_eq!(
        small.buffer > 0.0,
        spec == "lsbm",
        "{spec}: only lsbm keeps buffers"
    );
}

/// Every policy of the registry but `lo2` (above), and the stack
/// `leveled` and `tiered`.
const SPECS: &[&str] = &[
    "leveling",
    "lo1",
    "1-leveling",
    "tiered",
    "lazy-leveling",
    "binomial:k=4",
    // The tombstone policies pass over runs without tombstones (the
    // model writes none) instead of reading every file at each pick.
    "tsd",
    "tsa",
    // Round robin reads its cursor off the level below's newest
    // arrival, and coldest and oldest see that a level's files tie (the
    // model reads nothing, and with random keys every file holds some of
    // the first flushes), from what each run keeps of its files' times;
    // where they do not tie (sequential keys), oldest reads its run's
    // files by age.
    "rr",
    "cold",
    "old",
    // bLSM's split levels, and LSbM's compaction buffer on them: the
    // simulator trims no buffer, so the last level's buffer keeps every
    // file moved into it and grows with the tree.
    "blsm",
    "lsbm",
    // Never merges: level 0 holds every flush as a run of its own, and
    // a flush puts its run in front of all of them (in a `Vec`, 400
    // runs shifted per flush at 400 flushes, 4,000 at 4,000).
    "nomerge",
    // Seed 000's leveled stack policy pushes the file overlapping the
    // fewest files below: scoring every file of a level and of the
    // next at each pick visited 914 files per flush at 400 flushes and
    // 5,566 at 4,000, before it used the view's index.
    "leveled:b0=2,b=4",
    // The rest of the registry: whole-level merges (rare and large, so
    // a window holds one or none), stacks and tiering.
    "leveled",
    "full",
    "lazy-leveled",
    "tiered:b=4",
    "tier",
    "smtree",
    "partial",
    "concurrent",
    "bigtable:k=4",
    "minlatency:k=4",
    "exploring:k=4",
    "constant:k=4",
];

/// The file of `level`'s newest run a full scan finds least by `score`
/// (given the files of `target`'s runs, by `below`, overlapping it), ties
/// in key order.
fn scan<S: PartialOrd>(
    view: &TreeView,
    level: usize,
    target: usize,
    below: Below,
    score: impl Fn(&FileView, &[&FileView]) -> S,
) -> Option<u64> {
    let run = view.level(level).runs.first()?;
    let runs = &view.level(target).runs;
    let runs = match below {
        Below::Newest => &runs[..runs.len().min(1)],
        Below::All => &runs[..],
    };
    let mut best: Option<(S, u64)> = None;
    for f in &run.files {
        let over: Vec<&FileView> = runs
            .iter()
            .flat_map(|r| &r.files)
            .filter(|o| o.smallest <= f.largest && f.smallest <= o.largest)
            .collect();
        let s = score(f, &over);
        if best.as_ref().is_none_or(|(b, _)| s < *b) {
            best = Some((s, f.id));
        }
    }
    best.map(|(_, id)| id)
}

/// Overlapping bytes per byte of the file.
fn bytes_per_byte(f: &FileView, over: &[&FileView]) -> f64 {
    over.iter().map(|o| o.size).sum::<u64>() as f64 / f.size.max(1) as f64
}

/// Overlapping files, then their bytes.
fn files_then_bytes(_: &FileView, over: &[&FileView]) -> (usize, u64) {
    (over.len(), over.iter().map(|o| o.size).sum())
}

#[test]
fn the_index_picks_what_a_full_scan_picks() {
    for spec in ["leveling", "lo1", "lo2", "leveled:b0=2,b=4"] {
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
                        scan(view, level, target, below, bytes_per_byte),
                        "{spec}, flush {flush}, level {level}"
                    );
                    let picked =
                        view.by_fewest_overlapping(level, run, target, below, |f| Some(f.id));
                    assert_eq!(
                        picked,
                        scan(view, level, target, below, files_then_bytes),
                        "{spec}, flush {flush}, level {level}: fewest overlapping"
                    );
                }
            }
        }
    }
}

/// A policy that counts the full picks asked of it and, at each first
/// pick, checks it against the full pick's first task and counts the files
/// each visits.
#[derive(Debug)]
struct CountingPicks {
    inner: Box<dyn CompactionPolicy>,
    counts: Arc<PickCounts>,
}

#[derive(Debug, Default)]
struct PickCounts {
    full_picks: AtomicU64,
    first_picks: AtomicU64,
    first_visits: AtomicU64,
    all_visits: AtomicU64,
    disagreements: AtomicU64,
}

impl CompactionPolicy for CountingPicks {
    fn spec(&self) -> String {
        self.inner.spec()
    }

    fn pick(&self, view: &TreeView) -> Vec<CompactionTask> {
        self.counts.full_picks.fetch_add(1, Ordering::Relaxed);
        self.inner.pick(view)
    }

    fn pick_first(&self, view: &TreeView) -> Option<CompactionTask> {
        let c = &self.counts;
        c.first_picks.fetch_add(1, Ordering::Relaxed);
        let before = file_visits();
        let first = self.inner.pick_first(view);
        c.first_visits
            .fetch_add(file_visits() - before, Ordering::Relaxed);
        let before = file_visits();
        let all = self.inner.pick(view);
        c.all_visits
            .fetch_add(file_visits() - before, Ordering::Relaxed);
        if first != all.into_iter().next() {
            c.disagreements.fetch_add(1, Ordering::Relaxed);
        }
        first
    }
}

/// The simulator runs one task and asks again, so it asks only for the
/// first: `pick` builds a task for every level in need, each with its
/// overlap searches and reason, and all but one were thrown away. The
/// first is `pick`'s first (the oracle), and building it alone visits
/// fewer files over a run than building them all.
#[test]
fn the_simulator_builds_only_the_task_it_runs() {
    let defaults = PolicyDefaults {
        size_ratio: 10,
        target_file_size: UNIT,
    };
    for spec in ["leveling", "lo1", "1-leveling"] {
        let counts = Arc::new(PickCounts::default());
        let policy = CountingPicks {
            inner: policy_from_spec(spec, defaults).unwrap(),
            counts: counts.clone(),
        };
        let mut sim = Simulator::new(Box::new(policy), opts()).unwrap();
        for _ in 0..2000 {
            sim.flush(UNIT).unwrap();
        }
        let get = |n: &AtomicU64| n.load(Ordering::Relaxed);
        assert_eq!(get(&counts.full_picks), 0, "{spec}");
        assert!(get(&counts.first_picks) > 2000, "{spec}");
        assert_eq!(get(&counts.disagreements), 0, "{spec}");
        let (first, all) = (get(&counts.first_visits), get(&counts.all_visits));
        assert!(
            first < all,
            "{spec}: {first} files visited for first tasks, {all} for all"
        );
    }
}
