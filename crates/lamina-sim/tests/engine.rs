//! Engine ↔ simulator agreement: the real `Db` (in-memory filesystem, tiny
//! fixed-size flushes of unique keys) and the simulator fed the engine's
//! actual flush sizes must report the same write amplification and average
//! sorted-run count, within a few percent.
//!
//! To match the model (every merge completes before the next flush), the
//! test waits after each flush until the engine's compactions settle: it
//! runs the simulator in lockstep and waits until the engine has done as
//! many merges and holds as many runs as the model, or until the engine
//! stops making progress (the two may legitimately take different merges
//! when a size-driven policy meets a near-tie, see `settle`).
//!
//! Understood model differences:
//! * an SST is its data plus a fixed overhead (properties, footer, block
//!   trailers: about 150 bytes here), and a merge writes one overhead for
//!   all its inputs, so engine merges write less than the sum of their
//!   inputs. With the papers' model (sizes add up) the static policies'
//!   engine WA comes out about 1.5% below the simulator's; the size-driven
//!   ones compare run sizes, and the engine's merged runs, smaller by a few
//!   overheads, break the model's near-ties the other way (bigtable's WA
//!   came out 4% above). The test measures the overhead on the engine and
//!   gives it to the simulator (`ModelOptions::file_overhead`), after
//!   which the remaining gap is the repacking of blocks and key prefixes.
//! * run sizes that tie exactly in the model can still fall either way in
//!   the engine, so size-driven policies may take other merges at some
//!   flushes (counted as diverged flushes) while their totals agree.
#![expect(clippy::unwrap_used, reason = "a test may panic on a failed setup")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use lamina::vfs::mem::MemFs;
use lamina::{Db, DbStats, Options};
use lamina_sim::{ModelOptions, Simulator};

/// Keys per flush and value size: a flushed SST is about 10.5 KB, of which
/// about 150 bytes are per-file overhead (see the module docs).
const KEYS_PER_FLUSH: u64 = 32;
const VALUE_BYTES: usize = 300;

/// The memtable size: large, so that flushes happen only when the test asks
/// for one (`TreeView::memtable_bytes`; no policy tested here reads it).
const WRITE_BUFFER: usize = 1 << 20;

fn options(fs: &MemFs, spec: &str, write_buffer: usize) -> Options {
    let mut o = Options::default();
    o.vfs = Arc::new(fs.clone());
    o.write_buffer_size = write_buffer;
    // One file per run, as in the model.
    o.target_file_size = 1 << 40;
    o.block_size = 1024;
    o.block_cache_bytes = 256 * 1024;
    o.compaction = spec.parse().unwrap();
    o.compaction_threads = 1;
    // Stack policies bound runs themselves; a stall would only interfere.
    o.level0_stop_runs = 0;
    o
}

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Waits until no compaction runs (an empty-range `compact_range` waits
/// for the running one and then finds nothing to do).
fn barrier(db: &Db) {
    db.compact_range(Some(b"~~"), Some(b"~~")).unwrap();
}

fn merges_done(s: &DbStats) -> u64 {
    s.compactions + s.trivial_moves
}

/// Waits until the engine did `merges` merges and holds `runs` runs.
/// Returns true if it matched the model; with `patient` false it gives up
/// once the engine has made no progress for a second (it took other merges
/// than the model; the barrier's wait for running merges makes that safe
/// from slow compactions, and the delay covers a compaction thread slow to
/// wake on a loaded machine).
fn settle(db: &Db, merges: u64, runs: usize, patient: bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = u64::MAX;
    let mut since = Instant::now();
    let mut pause = Duration::from_micros(200);
    loop {
        barrier(db);
        let s = db.stats();
        let done = merges_done(&s);
        if done == merges && s.sorted_runs == runs {
            return true;
        }
        if done != last {
            last = done;
            since = Instant::now();
            pause = Duration::from_micros(200);
        } else if !patient && since.elapsed() >= Duration::from_secs(1) {
            eprintln!(
                "engine took other merges: {done} merges and {} runs, model {merges} and {runs}",
                s.sorted_runs
            );
            return false;
        }
        assert!(
            Instant::now() < deadline,
            "engine did not settle: {done} merges and {} runs, model {merges} and {runs}",
            s.sorted_runs
        );
        // Back off so the compaction thread gets the state lock between
        // barriers.
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

struct Outcome {
    engine: DbStats,
    sim_wa: f64,
    sim_avg_runs_at_flush: f64,
    sim_avg_runs: f64,
    sim_max_runs_at_flush: usize,
    diverged_flushes: u64,
}

/// The engine's per-SST overhead: two flushes of the workload merged into
/// one file write this much less than their sum.
fn file_overhead() -> u64 {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs, "nomerge", WRITE_BUFFER)).unwrap();
    write_flush(&db, 0);
    write_flush(&db, 1);
    db.set_compaction("constant:k=1").unwrap();
    // Not a loop over `stats()`: a snapshot may count a merge whose version
    // it read just before the merge was installed.
    db.wait_for_compactions().unwrap();
    let s = db.stats();
    assert_eq!((s.compactions, s.sorted_runs), (1, 1));
    db.close().unwrap();
    // Two flushed files became one: one overhead saved.
    s.flush_bytes_written - s.compaction_bytes_written
}

fn write_flush(db: &Db, t: u64) {
    write_keys(db, (0..KEYS_PER_FLUSH).map(|i| mix(t * KEYS_PER_FLUSH + i)));
}

/// Flush `t` of uneven sizes: 16 to 48 entries (±50% of 32), on keys of
/// their own (apart from `write_flush`'s).
fn write_uneven_flush(db: &Db, t: u64) {
    let n = 16 + mix(!t) % 33;
    write_keys(db, (0..n).map(|i| mix((1 << 40) + t * 64 + i)));
}

fn write_keys(db: &Db, keys: impl Iterator<Item = u64>) {
    let value = [b'v'; VALUE_BYTES];
    for key in keys {
        let k = format!("{key:016x}");
        db.put(k.as_bytes(), &value).unwrap();
    }
    db.flush().unwrap();
}

/// Runs `spec` on the engine and the model in lockstep. `static_policy`:
/// the model's merges are the engine's, so wait for them however long.
/// `lockstep`: require the engine to take the model's merges after (almost)
/// every flush; otherwise each flush waits for the engine's own merges
/// (`Db::wait_for_compactions`) and only the totals are compared (policies
/// that pick by key overlap cannot follow the model merge by merge, as its
/// synthetic key ranges differ from the engine's; near-ties of size-driven
/// policies compound over thousands of flushes). `write` writes and
/// flushes flush `t`; the model is fed the bytes the engine flushed.
fn agree(
    spec: &str,
    flushes: u64,
    static_policy: bool,
    lockstep: bool,
    write_buffer: usize,
    write: fn(&Db, u64),
) -> Outcome {
    let overhead = file_overhead();
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs, spec, write_buffer)).unwrap();
    let mut sim: Option<Simulator> = None;
    let mut flushed = 0;
    let mut merges = 0;
    let mut diverged = 0;
    for t in 0..flushes {
        write(&db, t);
        let st = db.stats();
        let size = st.flush_bytes_written - flushed;
        flushed = st.flush_bytes_written;
        let sim = sim.get_or_insert_with(|| {
            // buffer_bytes matters only to leveled: the engine's memtable size.
            let opts = ModelOptions {
                buffer_bytes: write_buffer as u64,
                file_overhead: overhead,
                ..ModelOptions::default()
            };
            Simulator::from_spec(spec, opts).unwrap()
        });
        let r = sim.flush(size).unwrap();
        merges += r.merges;
        if !lockstep {
            // Totals only: let the engine finish its own merges.
            db.wait_for_compactions().unwrap();
            if db.stats().sorted_runs != r.sorted_runs {
                diverged += 1;
            }
        } else if !settle(&db, merges, r.sorted_runs, static_policy) {
            diverged += 1;
            assert!(
                diverged * 50 <= flushes,
                "{spec}: the engine keeps taking other merges"
            );
            // Follow the engine from here: count what it did.
            merges = merges_done(&db.stats());
        }
    }
    let engine = db.stats();
    db.close().unwrap();
    let s = sim.map(|s| s.summary()).unwrap_or_default();
    eprintln!(
        "{spec}: {flushes} flushes, file overhead {overhead} B, engine WA {:.3} avg runs {:.3} | sim WA {:.3} avg runs at flush {:.3} (after merges {:.3}) | {} flushes diverged",
        engine.write_amplification,
        engine.avg_sorted_runs,
        s.write_amplification,
        s.avg_runs_at_flush,
        s.avg_sorted_runs,
        diverged
    );
    Outcome {
        engine,
        sim_wa: s.write_amplification,
        sim_avg_runs_at_flush: s.avg_runs_at_flush,
        sim_avg_runs: s.avg_sorted_runs,
        sim_max_runs_at_flush: s.max_runs_at_flush,
        diverged_flushes: diverged,
    }
}

fn within(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs()
}

/// Write amplification and runs per flush within 3% of the model's.
fn assert_totals_agree(spec: &str, o: &Outcome) {
    assert!(
        within(o.engine.write_amplification, o.sim_wa, 0.03),
        "{spec}: engine WA {} vs sim {}",
        o.engine.write_amplification,
        o.sim_wa
    );
    assert!(
        within(o.engine.avg_sorted_runs, o.sim_avg_runs_at_flush, 0.03),
        "{spec}: engine avg runs {} vs sim {}",
        o.engine.avg_sorted_runs,
        o.sim_avg_runs_at_flush
    );
}

fn check(spec: &str, flushes: u64, static_policy: bool) {
    let o = agree(
        spec,
        flushes,
        static_policy,
        true,
        WRITE_BUFFER,
        write_flush,
    );
    assert_eq!(o.engine.flushes, flushes);
    assert_totals_agree(spec, &o);
    assert!(o.sim_avg_runs <= o.sim_avg_runs_at_flush);
    if static_policy {
        // Static policies ignore sizes: the engine takes exactly the model's
        // merges.
        assert_eq!(o.diverged_flushes, 0, "{spec}");
        // Every flush waited for the previous one's merges, so no flush found
        // more than k runs, and the peak right after a flush is the model's.
        assert_eq!(o.engine.overshoot_flushes, 0, "{spec}");
        assert_eq!(o.engine.max_overshoot, 0, "{spec}");
        assert_eq!(
            o.engine.max_runs_at_flush, o.sim_max_runs_at_flush as u64,
            "{spec}"
        );
    } else {
        // With the overhead modelled, near-ties are rare (none were seen).
        assert!(
            o.diverged_flushes * 50 <= flushes,
            "{spec}: {}",
            o.diverged_flushes
        );
    }
}

#[test]
fn binomial_agrees() {
    check("binomial:k=4", 2000, true);
}

#[test]
fn minlatency_agrees() {
    check("minlatency:k=4", 2000, true);
}

#[test]
fn bigtable_agrees() {
    check("bigtable:k=5", 2000, false);
}

#[test]
fn exploring_agrees() {
    check("exploring:k=5", 2000, false);
}

#[test]
fn tiered_agrees() {
    check("tiered:b=4", 2000, false);
}

/// Flushes of uneven sizes (±50%) strand runs that no tier of
/// `tiered:b=4` would ever hold (a run older than one it can never join);
/// its merges take them. The engine and the model agree on totals (near
/// ties of the tier bounds, a few bytes of SST encoding apart, part them
/// merge by merge: about one flush in 20 ends with other runs), and the
/// engine's runs stay few: 11.2 on average. Before, the engine held 586
/// runs at most and 307.7 on average (write amplification 2.34, as the
/// stranded runs were never rewritten; now 5.01).
#[test]
fn tiered_agrees_with_uneven_flushes() {
    let o = agree(
        "tiered:b=4",
        2000,
        false,
        false,
        WRITE_BUFFER,
        write_uneven_flush,
    );
    assert_eq!(o.engine.flushes, 2000);
    assert_totals_agree("tiered:b=4", &o);
    assert!(
        o.engine.max_runs_at_flush <= 40,
        "{} runs at most",
        o.engine.max_runs_at_flush
    );
}

/// Leveled needs the engine's memtable size as its unit (level i holds
/// `buffer × b^i` bytes): a 16 KB memtable still takes the 32 entries of a
/// flush (about 12 KB). Leveled picks the file with the fewest overlaps by
/// real keys, which the model only approximates with synthetic ranges, so
/// the two are compared on totals, not merge by merge; the engine's picks
/// meet fewer next-level files, so its WA comes out lower (measured 17.60
/// against 19.20, docs/simulator.md). Ignored in CI: about a minute in a
/// release build, several in the test profile; run it with `--ignored`.
#[test]
#[ignore = "about a minute in release: run with --release --ignored"]
fn leveled_agrees() {
    let o = agree(
        "leveled:b0=2,b=4,file=10000",
        1500,
        false,
        false,
        16 << 10,
        write_flush,
    );
    assert_eq!(o.engine.compaction_errors, 0);
    assert!(
        within(o.engine.write_amplification, o.sim_wa, 0.10),
        "engine WA {} vs model WA {}",
        o.engine.write_amplification,
        o.sim_wa
    );
}

/// Seed 001's Full both ways on the engine and in the model: the whole
/// level in one merge (`full`) and every file of the level marked and
/// merged one by one (`full:mode=files`, a level draining until empty).
/// Flushes of about 10.5 KB of unique keys, a 16 KiB buffer and T = 4 (level
/// 0 holds 64 KiB), 4,000-byte files; the engine settles after each flush,
/// as in the model.
#[test]
fn full_both_ways_agrees() {
    for spec in ["full:T=4,file=4000", "full:T=4,file=4000,mode=files"] {
        let o = agree(spec, 300, false, false, 16 << 10, write_flush);
        assert_eq!(o.engine.compaction_errors, 0, "{spec}");
        assert!(
            within(o.engine.write_amplification, o.sim_wa, 0.05),
            "{spec}: engine WA {} vs model WA {}",
            o.engine.write_amplification,
            o.sim_wa
        );
    }
}

/// Seed 003 Table I on the engine, for `experiments/bounded-depth`: every
/// policy of the table with k = 4, 6, 8 for 3,000 lockstep flushes (each
/// flush waits for the previous one's merges, as in the model). Prints one
/// CSV line per run (`table1,policy,k,flushes,engine WA, engine avg runs at
/// flush, model WA, model avg runs after merges, diverged flushes`).
/// About 10 minutes in a release build; run it with `--ignored`.
#[test]
#[ignore = "an experiment, about 10 minutes: run with --ignored --nocapture"]
fn table1_engine_lockstep() {
    for k in [4, 6, 8] {
        for policy in ["bigtable", "binomial", "exploring", "minlatency"] {
            let spec = format!("{policy}:k={k}");
            let is_static = matches!(policy, "binomial" | "minlatency");
            let o = agree(&spec, 3000, is_static, is_static, WRITE_BUFFER, write_flush);
            println!(
                "table1,{policy},{k},{},{:.4},{:.4},{:.4},{:.4},{}",
                o.engine.flushes,
                o.engine.write_amplification,
                o.engine.avg_sorted_runs,
                o.sim_wa,
                o.sim_avg_runs,
                o.diverged_flushes
            );
            assert_eq!(o.engine.compaction_errors, 0, "{spec}");
        }
    }
}

/// A dataset's spatial index flushes when the budget it shares with the
/// primary index fills, so its flushes are a small share of the budget
/// (`Options::plan_with_mean_flush`): leveled must count levels in those
/// flushes, as the model does. Planning with the budget made level 1 about
/// 25 flushes deep and every level-0 push rewrote all of it (WA 63 against
/// the model's 15 in experiments/spatial).
#[test]
fn dataset_index_levels_count_its_own_flushes() {
    use lamina::spatial::{Comparator, Point};
    use lamina_dataset::{Dataset, DatasetOptions, Maintenance, Record};

    let fs = MemFs::new();
    let spec = "leveled:b0=2,b=4,file=8192";
    let opts = DatasetOptions {
        base: {
            let mut o = Options::default();
            o.vfs = Arc::new(fs.clone());
            o.target_file_size = 8192;
            o.block_size = 1024;
            o.level0_stop_runs = 0;
            o.compaction_threads = 1;
            o
        },
        memory_budget: 64 << 10,
        comparator: Comparator::Hilbert,
        // Lazy: writes make no lookups, so only the indexes' own work runs.
        maintenance: Maintenance::Lazy,
        primary_compaction: "binomial:k=8".parse().unwrap(),
        index_compaction: spec.parse().unwrap(),
        fields: Vec::new(),
    };
    let ds = Dataset::open("/ds", opts).unwrap();
    let mut flushes = 0;
    for id in 0..8_000u64 {
        let (x, y) = (mix(id) % 36_000, mix(id ^ (1 << 40)) % 18_000);
        ds.upsert(&Record {
            id,
            point: Point::new(x as f64 / 100.0 - 180.0, y as f64 / 100.0 - 90.0),
            fields: Vec::new(),
            payload: vec![b'p'; 1000],
        })
        .unwrap();
        // In lockstep with the model, which settles every flush's merges
        // before the next flush: on a loaded machine, flushes arriving
        // during merges change the schedule (engine WA 16 against 11 seen).
        let now = ds.index().stats().flushes;
        if now != flushes {
            ds.index().wait_for_compactions().unwrap();
            flushes = now;
        }
    }
    ds.flush().unwrap();
    ds.index().wait_for_compactions().unwrap();
    let engine = ds.index().stats();
    ds.close().unwrap();
    assert!(engine.flushes > 80, "{} flushes", engine.flushes);
    let mean = engine.flush_bytes_written / engine.flushes;
    // A flush of the index is a few percent of the budget.
    assert!(mean * 10 < 64 << 10, "mean flush {mean} B");
    let mut sim = Simulator::from_spec(
        spec,
        ModelOptions {
            buffer_bytes: mean,
            ..ModelOptions::default()
        },
    )
    .unwrap();
    for _ in 0..engine.flushes {
        sim.flush(mean).unwrap();
    }
    let model = sim.summary().write_amplification;
    eprintln!(
        "dataset index: {} flushes of {mean} B, engine WA {:.2}, model WA {model:.2}",
        engine.flushes, engine.write_amplification
    );
    assert!(
        within(engine.write_amplification, model, 0.25),
        "engine WA {} vs model {model}",
        engine.write_amplification
    );
}
