//! `lamina tune --calibrate`: measures the cost model's steps with the
//! engine itself, on a scratch database in the temporary directory.
//!
//! 1. puts into a memtable that never flushes, then gets of those keys:
//!    `op_ns` (a get from the memtable) and `write_ns` (a put, less it);
//! 2. the same puts with a 1 MiB buffer under `leveling:T=4`, waiting for
//!    the tree to settle: `byte_ns` = the time beyond the puts / bytes
//!    flushed and merged;
//! 3. on that tree with a 64 KiB block cache, gets of missing keys
//!    (`probe_ns` per run) and of present keys (`block_ns`);
//! 4. with a cache holding everything, warmed: `cached_block_ns`;
//! 5. a full scan: `entry_ns`.

use std::ops::Bound;
use std::time::Instant;

use anyhow::{Context, Result};
use lamina::compaction::CompactionSpec;
use lamina::{Db, Options};
use lamina_tune::CostModel;

/// Entries written (1 KiB values: 32 MiB).
const ENTRIES: u64 = 32_768;
const VALUE: usize = 1024;

/// A scattered 16-byte key (hashed order, as YCSB's).
fn key(i: u64) -> [u8; 16] {
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 29;
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&x.to_be_bytes());
    k[8..].copy_from_slice(&i.to_be_bytes());
    k
}

/// A key that is not in the database.
fn missing(i: u64) -> [u8; 16] {
    let mut k = key(i);
    k[15] ^= 0x5a;
    k[14] ^= 0xff;
    k
}

/// Nanoseconds per call of `f(i)` over `0..n` in a scattered order.
fn per_call(n: u64, mut f: impl FnMut(u64) -> Result<()>) -> Result<f64> {
    let start = Instant::now();
    for i in 0..n {
        f(i.wrapping_mul(7919) % n)?;
    }
    Ok(start.elapsed().as_nanos() as f64 / n as f64)
}

fn open(dir: &std::path::Path, buffer: usize, cache: usize) -> Result<Db> {
    let mut o = Options::default();
    o.write_buffer_size = buffer;
    o.block_cache_bytes = cache;
    o.compaction = CompactionSpec::leveling(4);
    Db::open(dir, o).with_context(|| format!("opening {}", dir.display()))
}

/// Measures the cost model.
pub fn measure() -> Result<CostModel> {
    let scratch = std::env::temp_dir().join(format!("lamina-calibrate-{}", std::process::id()));
    let result = measure_in(&scratch);
    // The directory this run made.
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

fn measure_in(scratch: &std::path::Path) -> Result<CostModel> {
    let value = vec![b'v'; VALUE];
    let mut c = CostModel::default();
    // 1. The memtable alone.
    let db = open(&scratch.join("mem"), 256 << 20, 1 << 20)?;
    let put = per_call(ENTRIES, |i| Ok(db.put(&key(i), &value)?))?;
    c.op_ns = per_call(ENTRIES, |i| db.get(&key(i)).map(|_| ()).map_err(Into::into))?;
    c.write_ns = (put - c.op_ns).max(0.0);
    db.close()?;
    // 2. Flushes and merges.
    let dir = scratch.join("tree");
    let db = open(&dir, 1 << 20, 64 << 10)?;
    let start = Instant::now();
    for i in 0..ENTRIES {
        db.put(&key(i), &value)?;
    }
    db.flush()?;
    db.wait_for_compactions()?;
    let elapsed = start.elapsed().as_nanos() as f64;
    let s = db.stats();
    let written = (s.flush_bytes_written + s.compaction_bytes_written).max(1) as f64;
    c.byte_ns = ((elapsed - ENTRIES as f64 * put) / written).max(0.0);
    let runs = s.sorted_runs.max(1) as f64;
    db.close()?;
    // 3. Probes and block reads, with a cache too small to matter.
    let db = open(&dir, 1 << 20, 64 << 10)?;
    let miss = per_call(ENTRIES, |i| {
        db.get(&missing(i)).map(|_| ()).map_err(Into::into)
    })?;
    c.probe_ns = ((miss - c.op_ns) / runs).max(0.0);
    let hit = per_call(ENTRIES, |i| db.get(&key(i)).map(|_| ()).map_err(Into::into))?;
    c.block_ns = (hit - c.op_ns - runs * c.probe_ns).max(0.0);
    db.close()?;
    // 4. Every block cached.
    let db = open(&dir, 1 << 20, 256 << 20)?;
    for i in 0..ENTRIES {
        db.get(&key(i))?;
    }
    let cached = per_call(ENTRIES, |i| db.get(&key(i)).map(|_| ()).map_err(Into::into))?;
    c.cached_block_ns = (cached - c.op_ns - runs * c.probe_ns).max(0.0);
    // 5. A scan's step.
    let start = Instant::now();
    let mut n = 0u64;
    for entry in db.scan(Bound::Unbounded, Bound::Unbounded)? {
        entry?;
        n += 1;
    }
    c.entry_ns = start.elapsed().as_nanos() as f64 / n.max(1) as f64;
    db.close()?;
    c.validate()?;
    Ok(c)
}
