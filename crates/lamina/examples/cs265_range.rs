//! Seed 004's Fig. 4 for one tree: range queries on a thread pool of 1 to
//! N threads (`Options::scan_threads`). Loads `PUTS` uniform random `p K V`
//! pairs (4-byte keys and values, stored as the DSL server stores them)
//! with a write buffer of `BUFFER` bytes under compaction `SPEC`, lets
//! compaction settle, then for each thread count in `THREADS` (e.g.
//! `1,2,3`) reopens the database with that many scan threads and runs the
//! same `RANGES` range queries, each over `SELECTIVITY` of the key space
//! (`r LO HI`, inclusive-exclusive as the DSL's). The block cache is off,
//! so each query reads its blocks from the files, as the seed's server
//! did. For each latency of `SEEK_US` (e.g. `0,1000`) above 0, every read
//! that does not continue the previous read of its file sleeps that long
//! (`vfs::SlowReads`: an emulated device whose reads overlap when issued
//! in parallel, as an SSD's do).
//!
//! Prints one CSV row per latency and thread count: the tree's shape, wall seconds,
//! entries returned, the CPU seconds of the querying thread and of the
//! whole process (the rest is the pool's), the emulated seeks, and the
//! load average when the queries started.
//!
//! `cargo run --release -p lamina-lsm --example cs265_range -- SPEC BUFFER PUTS RANGES SELECTIVITY THREADS SEEKS_US DIR`

#![expect(clippy::expect_used, reason = "an example may panic on a failed setup")]
// Options are set on a default (they are `#[non_exhaustive]` for callers).

use std::ops::Bound;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lamina::vfs::{OsFs, SlowReads};
use lamina::{Db, Options, SyncMode};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The DSL server's key layout: big-endian with the sign bit flipped, so
/// byte order is numeric order.
fn dsl_key(k: i32) -> [u8; 4] {
    ((k as u32) ^ 0x8000_0000).to_be_bytes()
}

fn cpu(clock: rustix::time::ClockId) -> f64 {
    let t = rustix::time::clock_gettime(clock);
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

fn load1() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_default()
}

#[expect(
    clippy::too_many_lines,
    reason = "predates the lint; one long sequence of steps, to be cut like `plan`"
)]
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, spec, buffer, puts, ranges, selectivity, threads, seek_us, dir] = args.as_slice()
    else {
        eprintln!("usage: cs265_range SPEC BUFFER PUTS RANGES SELECTIVITY THREADS SEEK_US DIR");
        std::process::exit(2);
    };
    let buffer: usize = buffer.parse().expect("BUFFER must be a byte count");
    let puts: u64 = puts.parse().expect("PUTS must be a number");
    let ranges: u64 = ranges.parse().expect("RANGES must be a number");
    let selectivity: f64 = selectivity.parse().expect("SELECTIVITY must be a fraction");
    let threads: Vec<usize> = threads
        .split(',')
        .map(|t| t.parse().expect("THREADS: counts separated by commas"))
        .collect();
    let seeks_us: Vec<u64> = seek_us
        .split(',')
        .map(|t| {
            t.parse()
                .expect("SEEK_US: microseconds separated by commas")
        })
        .collect();
    // The run creates DIR and removes it at the end: it never touches a
    // directory it did not make.
    if std::path::Path::new(dir).exists() {
        eprintln!("{dir} exists; give a path this run may create and remove");
        std::process::exit(2);
    }
    let options = |scan_threads: usize, vfs: Arc<SlowReads>| {
        let mut o = Options::default();
        o.vfs = vfs;
        o.compaction = spec.parse().expect("SPEC");
        o.write_buffer_size = buffer;
        o.target_file_size = (buffer as u64).max(2 << 20);
        o.bloom_bits_per_key = 4.8;
        o.block_cache_bytes = 0;
        o.sync = SyncMode::None;
        o.scan_threads = scan_threads;
        o
    };
    let plain = Arc::new(SlowReads::new(Arc::new(OsFs), Duration::ZERO));
    plain.set_enabled(false);
    let db = Db::open(dir, options(1, plain)).expect("open");
    let mut rng = StdRng::seed_from_u64(2023);
    for _ in 0..puts {
        let (k, v): (i32, i32) = (rng.gen(), rng.gen());
        db.put(&dsl_key(k), &v.to_le_bytes()).expect("put");
    }
    db.flush().expect("flush");
    db.wait_for_compactions().expect("settle");
    let stats = db.stats();
    let (levels, runs) = (db.num_levels(), stats.sorted_runs);
    db.close().expect("close");
    // The same queries for every thread count.
    let span = (selectivity * 2f64.powi(32)) as i64;
    let queries: Vec<(i32, i32)> = (0..ranges)
        .map(|_| {
            let lo = rng.gen_range(i64::from(i32::MIN)..=i64::from(i32::MAX) - span);
            (lo as i32, (lo + span) as i32)
        })
        .collect();
    println!(
        "spec,levels,runs,threads,seek_us,ranges,entries,seconds,ranges_per_sec,\
         query_thread_cpu_s,process_cpu_s,seeks,load1"
    );
    let mut first_entries = None;
    for (&us, &n) in seeks_us
        .iter()
        .flat_map(|us| threads.iter().map(move |n| (us, n)))
    {
        let seek = Duration::from_micros(us);
        let slow = Arc::new(SlowReads::new(Arc::new(OsFs), seek));
        slow.set_enabled(false);
        let db = Db::open(dir, options(n, slow.clone())).expect("reopen");
        slow.set_enabled(true);
        let seeks = slow.seeks();
        let load = load1();
        let (thread0, process0) = (
            cpu(rustix::time::ClockId::ThreadCPUTime),
            cpu(rustix::time::ClockId::ProcessCPUTime),
        );
        let start = Instant::now();
        let mut entries = 0u64;
        for &(lo, hi) in &queries {
            let (lo, hi) = (dsl_key(lo), dsl_key(hi));
            for kv in db
                .scan(Bound::Included(&lo[..]), Bound::Excluded(&hi[..]))
                .expect("scan")
            {
                let (k, v) = kv.expect("entry");
                entries += u64::from(k.len() == 4 && v.len() == 4);
            }
        }
        let secs = start.elapsed().as_secs_f64();
        let thread_cpu = cpu(rustix::time::ClockId::ThreadCPUTime) - thread0;
        let process_cpu = cpu(rustix::time::ClockId::ProcessCPUTime) - process0;
        slow.set_enabled(false);
        db.close().expect("close");
        // Every thread count returns the same entries.
        assert_eq!(
            *first_entries.get_or_insert(entries),
            entries,
            "threads {n}"
        );
        println!(
            "{spec},{levels},{runs},{n},{},{ranges},{entries},{secs:.4},{:.2},{thread_cpu:.4},{process_cpu:.4},{},{load}",
            seek.as_micros(),
            ranges as f64 / secs,
            slow.seeks() - seeks,
        );
    }
    std::fs::remove_dir_all(dir).expect("remove the directory this run created");
}
