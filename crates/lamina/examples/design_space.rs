//! Seed 001's experiments for one strategy: `NUM` inserts of unique 4-byte
//! keys and 124-byte values into an empty database (T = 10, 10 bits per
//! key, 8 MiB block cache, 4 KiB blocks, one compaction thread; buffer and
//! file size 8 MiB unless set), then a flush and a wait until the strategy
//! has nothing left to do, so that every compaction the inserts caused is
//! counted. Keys come from `lamina_workload`'s seed-001 generator
//! ([`lamina_workload::KvGenerator`]: a slot drawn from the ingestion
//! distribution, the first free one at or after it, even keys; empty
//! lookups use odd keys). Optional `KEY=VALUE` arguments add the other
//! figures' knobs:
//!
//! * `ingest=uniform|zipf|normal`: the distribution of inserts over the key
//!   space, and of updates and deletes over the live keys in insertion
//!   order (Fig. 6; Zipf s = 1, normal σ = 34%);
//! * `lookup=uniform|zipf|normal`: the distribution of point lookups, over
//!   the live keys in insertion order (non-empty) or the key space (empty)
//!   (Fig. 7);
//! * `value=BYTES`: value size, default 124 (Fig. 8(j)–(k));
//! * `buffer=BYTES`: memtable size (the spec's `file=` sets the files);
//! * `block=BYTES`: data block (page) size (Fig. 8(o), Fig. 12);
//! * `bpk=BITS`: Bloom bits per key (Fig. 14);
//! * `cache=BYTES`: block cache size;
//! * `cache_index_and_filter_blocks=1`: tables' index and filter blocks
//!   are read through the block cache and evicted like data blocks, as in
//!   the paper's RocksDB (Fig. 4(f), Fig. 9(c, d), Fig. 14); 0 (default):
//!   tables hold them; `pin_l0=1` pins level 0's
//!   (`pin_l0_filter_and_index_blocks_in_cache`);
//! * `priority=1`: compactions have priority over writes
//!   (`Options::writes_wait_for_compactions`, the paper's setup);
//! * `updates=R`: R updates of an existing key per insert (Fig. 8(a)–(c));
//! * `deletes=F`: a fraction F of the operations delete an existing key
//!   (Fig. 8(d)–(f)); `persist_ms=MS` is the delete-persistence threshold
//!   counted (default: half the ingestion time);
//! * `lookups=N`: after ingestion, N point lookups at each α (fraction of
//!   empty lookups) of 0, 0.2, 0.4, 0.6, 0.8, 1 (Fig. 4(e), (f), (h)), or
//!   only at `alpha=A`;
//! * `scans=N`: N range scans at each selectivity of 0.001%, 0.01%, 0.1%
//!   and 1% of the key space (Fig. 4(g));
//! * `interleave=N`: N existing-key lookups spread over the second half of
//!   the ingestion (Fig. 5).
//!
//! Prints `Db::stats()` as JSON with the run's own measurements added:
//! `disk_levels`, `valid_bytes` (the database's size after a full
//! compaction, measured after the stats), `deletes`, `lookups`, `scans`.
//!
//! `cargo run --release -p lamina-lsm --example design_space -- SPEC NUM DIR [KEY=VALUE...]`

#![expect(clippy::expect_used, reason = "an example may panic on a failed setup")]

use std::collections::HashMap;
use std::ops::Bound;
use std::path::Path;
use std::time::{Duration, Instant};

use lamina::{Db, Options};
use lamina_workload::dist::{KeyDist, KeySampler};
use lamina_workload::{KvGenerator, KvOp, KvSpec};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

/// The knobs `run` accepts.
pub const KNOBS: [&str; 17] = [
    "ingest",
    "lookup",
    "value",
    "buffer",
    "block",
    "bpk",
    "cache",
    "cache_index_and_filter_blocks",
    "pin_l0",
    "priority",
    "updates",
    "deletes",
    "persist_ms",
    "lookups",
    "alpha",
    "scans",
    "interleave",
];

const ALPHAS: [f64; 6] = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0];
const SELECTIVITIES: [f64; 4] = [0.00001, 0.0001, 0.001, 0.01];

/// Mean and percentiles of latencies in microseconds (exact: sorted).
fn summary(mut us: Vec<f64>) -> Value {
    us.sort_by(f64::total_cmp);
    let q = |p: f64| us.get(((us.len() as f64 * p) as usize).min(us.len().saturating_sub(1)));
    json!({
        "count": us.len(),
        "mean_us": us.iter().sum::<f64>() / us.len().max(1) as f64,
        "p50_us": q(0.5), "p90_us": q(0.9), "p99_us": q(0.99), "max_us": us.last(),
    })
}

/// CPU time of the calling thread: per-operation cost that does not grow
/// with the machine's load, unlike wall time.
fn cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// The block reads and cache misses of the lookups between two stats, per
/// lookup. `read_pages` counts reads in `block`-byte pages, the paper's
/// I/Os: a data block is one, an index or filter block read back
/// (`cache_index_and_filter_blocks`) its bytes over `block` (the paper's
/// filter block is 20 pages, its index block 4).
fn io_delta(before: &lamina::DbStats, after: &lamina::DbStats, n: usize, block: usize) -> Value {
    let per = |a: u64, b: u64| (a - b) as f64 / n.max(1) as f64;
    let meta_misses = per(after.cache_misses.filter, before.cache_misses.filter)
        + per(after.cache_misses.index, before.cache_misses.index);
    let meta_bytes = per(after.index_bytes_read, before.index_bytes_read)
        + per(after.filter_bytes_read, before.filter_bytes_read);
    let blocks = per(after.get_blocks_read, before.get_blocks_read);
    json!({
        "read_amplification": blocks,
        "read_pages": blocks - meta_misses + meta_bytes / block.max(1) as f64,
        "filter_misses": per(after.cache_misses.filter, before.cache_misses.filter),
        "index_misses": per(after.cache_misses.index, before.cache_misses.index),
        "data_misses": per(after.cache_misses.data, before.cache_misses.data),
        "filter_bytes": per(after.filter_bytes_read, before.filter_bytes_read),
        "index_bytes": per(after.index_bytes_read, before.index_bytes_read),
    })
}

/// Live keys in insertion order (a delete moves the last one into the
/// hole, as `lamina_workload`'s generator does) and the samplers that pick
/// among them.
struct Keys {
    list: Vec<u32>,
    /// Fresh keys: the inserts of a seed-001 generator.
    fresh: KvGenerator,
    ingestion: KeySampler,
    lookup: KeySampler,
}

impl Keys {
    fn new(inserts: u64, ingestion: KeyDist, lookup: KeyDist) -> Keys {
        let spec = KvSpec {
            inserts,
            ingestion,
            lookup,
            key_size: 4,
            seed: 2021,
            ..KvSpec::default()
        };
        Keys {
            list: Vec::new(),
            fresh: KvGenerator::new(spec).expect("workload"),
            ingestion: KeySampler::new(ingestion),
            lookup: KeySampler::new(lookup),
        }
    }
    /// A key never inserted before, now live.
    fn insert_fresh(&mut self) -> u32 {
        let Some(KvOp::Insert(k)) = self.fresh.next() else {
            unreachable!("the generator holds an insert per operation")
        };
        let k = u32::try_from(k).expect("4-byte keys");
        self.list.push(k);
        k
    }
    /// A live key drawn by the ingestion distribution, removed.
    fn remove(&mut self, rng: &mut StdRng) -> Option<u32> {
        if self.list.is_empty() {
            return None;
        }
        let i = self.ingestion.sample(rng, self.list.len() as u64) as usize;
        Some(self.list.swap_remove(i))
    }
    /// A live key to update (ingestion distribution).
    fn update_target(&mut self, rng: &mut StdRng) -> u32 {
        self.list[self.ingestion.sample(rng, self.list.len() as u64) as usize]
    }
    /// A live key to look up (lookup distribution).
    fn lookup_target(&mut self, rng: &mut StdRng) -> u32 {
        self.list[self.lookup.sample(rng, self.list.len() as u64) as usize]
    }
    /// A key no operation wrote, by the lookup distribution.
    fn absent(&mut self, rng: &mut StdRng) -> u32 {
        let k = self.fresh.spec().absent_key(&mut self.lookup, rng);
        u32::try_from(k).expect("4-byte keys")
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, spec, num, dir, knobs @ ..] = args.as_slice() else {
        eprintln!("usage: design_space SPEC NUM DIR [KEY=VALUE...]");
        std::process::exit(2);
    };
    let num: u64 = num.parse().expect("NUM must be a number");
    // The run creates DIR and removes it at the end: it never touches a
    // directory it did not make.
    if Path::new(dir).exists() {
        eprintln!("{dir} exists; give a path this run may create and remove");
        std::process::exit(2);
    }
    let stats = run(spec, num, Path::new(dir), knobs);
    println!("{}", serde_json::to_string_pretty(&stats).expect("json"));
}

/// One run of `spec` (a compaction spec) for `num` operations in `dir`,
/// which the run creates and removes; returns the statistics as JSON.
#[expect(
    clippy::too_many_lines,
    reason = "predates the lint; one long sequence of steps, to be cut like `plan`"
)]
pub fn run(spec: &str, num: u64, dir: &Path, knobs: &[String]) -> Value {
    let knob: HashMap<&str, &str> = knobs
        .iter()
        .map(|kv| kv.split_once('=').expect("KEY=VALUE"))
        .collect();
    for k in knob.keys() {
        assert!(KNOBS.contains(k), "unknown knob {k} (known: {KNOBS:?})");
    }
    let get = |k: &str, d: f64| {
        knob.get(k).map_or(d, |v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{k}={v}: a number expected"))
        })
    };
    let dist = |k: &str| {
        knob.get(k).map_or(KeyDist::Uniform, |v| {
            serde_json::from_value(Value::from(*v)).expect("uniform, zipf or normal")
        })
    };
    let spec: lamina::compaction::CompactionSpec = spec.parse().expect("SPEC");
    let buffer = get("buffer", (8 << 20) as f64) as usize;
    let opts = Options::builder()
        .compaction(spec)
        .write_buffer_size(buffer)
        .target_file_size(buffer as u64)
        .block_size(get("block", 4096.0) as usize)
        .size_ratio(10)
        .bloom_bits_per_key(get("bpk", 10.0))
        .block_cache_bytes(get("cache", (8 << 20) as f64) as usize)
        .cache_index_and_filter_blocks(get("cache_index_and_filter_blocks", 0.0) != 0.0)
        .pin_l0_filter_and_index_blocks_in_cache(get("pin_l0", 0.0) != 0.0)
        .compaction_threads(1)
        .writes_wait_for_compactions(get("priority", 0.0) != 0.0)
        .build()
        .expect("options");
    let db = Db::open(dir, opts).expect("open");
    let mut rng = StdRng::seed_from_u64(2021);
    let mut value = vec![0u8; get("value", 124.0) as usize];
    let (updates, deletes) = (get("updates", 0.0), get("deletes", 0.0));
    let interleave = get("interleave", 0.0) as u64;
    let mut keys = Keys::new(num, dist("ingest"), dist("lookup"));
    let (mut deleted, mut interleaved_us) = (0u64, Vec::new());
    let start = Instant::now();
    let start_cpu = cpu_time();
    for op in 0..num {
        rng.fill(&mut value[..]);
        if deletes > 0.0 && rng.gen_bool(deletes) {
            if let Some(k) = keys.remove(&mut rng) {
                db.delete(&k.to_be_bytes()).expect("delete");
                deleted += 1;
                continue;
            }
        }
        let key =
            if updates > 0.0 && !keys.list.is_empty() && rng.gen_bool(updates / (1.0 + updates)) {
                keys.update_target(&mut rng)
            } else {
                keys.insert_fresh()
            };
        db.put(&key.to_be_bytes(), &value).expect("put");
        // Lookups spread evenly over the second half of the ingestion.
        if interleave > 0 && op >= num / 2 {
            let due = (op - num / 2 + 1) * interleave / (num - num / 2);
            while (interleaved_us.len() as u64) < due {
                let k = keys.lookup_target(&mut rng);
                let t = Instant::now();
                assert!(db.get(&k.to_be_bytes()).expect("get").is_some());
                interleaved_us.push(t.elapsed().as_secs_f64() * 1e6);
            }
        }
    }
    let ingest = start.elapsed();
    let ingest_cpu = cpu_time() - start_cpu;
    db.flush().expect("flush");
    db.wait_for_compactions().expect("settle");
    let total = start.elapsed();

    let mut stats = serde_json::to_value(db.stats()).expect("json");
    let st = db.stats();
    // Down to the deepest non-empty level: a whole-level merge can leave
    // a level above it empty.
    let disk_levels = st
        .levels
        .iter()
        .rposition(|l| l.bytes > 0)
        .map_or(0, |i| i + 1);
    eprintln!(
        "{disk_levels} disk levels, MiB per level: {:?}",
        st.levels.iter().map(|l| l.bytes >> 20).collect::<Vec<_>>()
    );
    stats["knobs"] = json!(knob);
    stats["disk_levels"] = disk_levels.into();
    stats["ingest_seconds"] = ingest.as_secs_f64().into();
    stats["settled_seconds"] = total.as_secs_f64().into();
    stats["live_keys"] = keys.list.len().into();
    if interleave > 0 {
        stats["interleaved"] = summary(interleaved_us);
    }
    stats["ingest_cpu_seconds"] = ingest_cpu.as_secs_f64().into();
    if deletes > 0.0 {
        let threshold =
            Duration::from_millis(get("persist_ms", ingest.as_millis() as f64 / 2.0) as u64);
        stats["deletes"] = json!({
            "issued": deleted,
            "threshold_ms": threshold.as_millis() as u64,
            "persisted_within": db.deletes_persisted_within(threshold),
            "persisted": st.tombstone_purge_age.count,
            "remaining": st.tombstones,
        });
    }

    let lookups = get("lookups", 0.0) as usize;
    if lookups > 0 {
        let mut rows = Vec::new();
        let alphas = if knob.contains_key("alpha") {
            vec![get("alpha", 0.0)]
        } else {
            ALPHAS.to_vec()
        };
        for alpha in alphas {
            let before = db.stats();
            let cpu = cpu_time();
            let (mut empty, mut found) = (Vec::new(), Vec::new());
            for _ in 0..lookups {
                let is_empty = rng.gen_bool(alpha);
                let k = if is_empty {
                    keys.absent(&mut rng)
                } else {
                    keys.lookup_target(&mut rng)
                };
                let t = Instant::now();
                let v = db.get(&k.to_be_bytes()).expect("get");
                let us = t.elapsed().as_secs_f64() * 1e6;
                assert_eq!(v.is_none(), is_empty, "lookup of {k}");
                if is_empty {
                    empty.push(us)
                } else {
                    found.push(us)
                }
            }
            let cpu_us = (cpu_time() - cpu).as_secs_f64() * 1e6 / lookups as f64;
            let io = io_delta(&before, &db.stats(), lookups, get("block", 4096.0) as usize);
            let all: Vec<f64> = empty.iter().chain(&found).copied().collect();
            rows.push(json!({
                "alpha": alpha,
                "cpu_us": cpu_us,
                "all": summary(all),
                "empty": summary(empty),
                "found": summary(found),
                "io": io,
            }));
        }
        stats["lookups"] = rows.into();
    }
    let scans = get("scans", 0.0) as usize;
    if scans > 0 {
        let mut rows = Vec::new();
        for sel in SELECTIVITIES {
            let width = (sel * f64::from(u32::MAX)) as u64;
            let (mut us, mut entries) = (Vec::new(), 0usize);
            let cpu = cpu_time();
            for _ in 0..scans {
                let lo: u32 = rng.gen_range(0..=(u64::from(u32::MAX) - width) as u32);
                let hi = (u64::from(lo) + width) as u32;
                let t = Instant::now();
                let scan = db
                    .scan(
                        Bound::Included(&lo.to_be_bytes()),
                        Bound::Excluded(&hi.to_be_bytes()),
                    )
                    .expect("scan");
                for entry in scan {
                    entry.expect("entry");
                    entries += 1;
                }
                us.push(t.elapsed().as_secs_f64() * 1e6);
            }
            rows.push(json!({
                "selectivity": sel,
                "cpu_us": (cpu_time() - cpu).as_secs_f64() * 1e6 / scans as f64,
                "entries_per_scan": entries as f64 / scans as f64,
                "latency": summary(us),
            }));
        }
        stats["scans"] = rows.into();
    }
    // The logically valid data as this engine stores it: the database's
    // size once a full compaction has dropped every stale version and
    // tombstone (seed 001's SA = (size - valid) / valid).
    db.compact_range(None, None).expect("full compaction");
    stats["valid_bytes"] = db.stats().disk_bytes.into();
    db.close().expect("close");
    std::fs::remove_dir_all(dir).expect("remove the directory this run created");
    stats
}
