//! Scan throughput and allocations over ~1M entries on disk:
//! `cargo run --release -p lamina-lsm --example scan_bench [ENTRIES]`.
//!
//! Loads ENTRIES (default 1,000,000) keys of 13 bytes with 32-byte values,
//! flushes and lets compaction settle, then times full scans forward
//! (`Db::scan`) and backward (`Db::scan_rev`), which return owned pairs,
//! and a `Cursor` walk both ways, which borrows them; each reports entries
//! per second of the scanning thread's CPU time (best of 10: on a shared
//! machine wall time mostly measures the neighbours) and heap allocations
//! per entry, counted by a counting global allocator.

// The counting allocator is the one unsafe item: it forwards to the system
// allocator.
#![expect(
    unsafe_code,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an example may panic on a failed setup; the counting allocator implements `GlobalAlloc`"
)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};

/// CPU seconds the calling thread has run.
fn cpu_secs() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

use lamina::{Db, Options, WriteBatch};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `scan` (which returns the entries it saw) 10 times after a warm-up;
/// prints the best rate and the allocations per entry of the last run.
fn measure(what: &str, n: u64, mut scan: impl FnMut() -> u64) {
    assert_eq!(scan(), n, "{what}: warm-up saw the wrong number of entries");
    let mut best = f64::MAX;
    let mut allocs = 0;
    for _ in 0..10 {
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        let t = cpu_secs();
        let seen = scan();
        let secs = cpu_secs() - t;
        allocs = ALLOCATIONS.load(Ordering::Relaxed) - before;
        assert_eq!(seen, n, "{what}");
        best = best.min(secs);
    }
    println!(
        "{what:<28} {:>6.1} M entries/s  {:>6.3} allocations/entry  ({best:.3} CPU s)",
        n as f64 / best / 1e6,
        allocs as f64 / n as f64
    );
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .map_or(1_000_000, |a| a.parse().expect("ENTRIES"));
    let dir = tempfile::tempdir().unwrap();
    let opts = {
        let mut o = Options::default();
        o.write_ahead_log = false;
        o
    };
    let db = Db::open(dir.path(), opts).unwrap();
    let mut batch = WriteBatch::new();
    for i in 0..n {
        let k = format!("key{i:010}");
        let v = format!("{i:032}");
        batch.put(k.as_bytes(), v.as_bytes());
        if batch.len() == 1000 {
            db.write(std::mem::take(&mut batch)).unwrap();
        }
    }
    db.write(batch).unwrap();
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    println!("{n} entries in {} levels", db.num_levels());

    measure("scan (owned pairs)", n, || {
        let mut seen = 0;
        for kv in db.scan(Bound::Unbounded, Bound::Unbounded).unwrap() {
            let (k, v) = kv.unwrap();
            seen += u64::from(!k.is_empty() && !v.is_empty());
        }
        seen
    });
    measure("scan_rev (owned pairs)", n, || {
        let mut seen = 0;
        for kv in db.scan_rev(Bound::Unbounded, Bound::Unbounded).unwrap() {
            let (k, v) = kv.unwrap();
            seen += u64::from(!k.is_empty() && !v.is_empty());
        }
        seen
    });
    // CURSOR-BEGIN (absent before the cursor existed)
    measure("cursor next (borrowed)", n, || {
        let mut c = db.iter(Bound::Unbounded, Bound::Unbounded).unwrap();
        c.seek_to_first().unwrap();
        let mut seen = 0;
        while c.valid() {
            seen += u64::from(!c.key().is_empty() && !c.value().is_empty());
            c.next().unwrap();
        }
        seen
    });
    measure("cursor prev (borrowed)", n, || {
        let mut c = db.iter(Bound::Unbounded, Bound::Unbounded).unwrap();
        c.seek_to_last().unwrap();
        let mut seen = 0;
        while c.valid() {
            seen += u64::from(!c.key().is_empty() && !c.value().is_empty());
            c.prev().unwrap();
        }
        seen
    });
    // CURSOR-END
    db.close().unwrap();
}
