//! Costs of the range partitioners' building blocks (seed 000 §5.4.4),
//! printed beside the seed's figures:
//!
//! * StreamHist (128 bins): nanoseconds per insert (keys in order, as a
//!   table is written, and shuffled), bytes per table as stored in the
//!   properties block, and the error of range estimates against exact
//!   counts;
//! * the λ key image: nanoseconds per 128-byte string, per byte;
//! * Table 5.1: collision rates of byte strings sharing a prefix of length
//!   p (columns), of length l = p + 1 ..= p + 7 (rows).
//!
//! `cargo run --release -p lamina-compaction --example partition_costs [-- --quick]`

use std::collections::HashSet;
use std::hint::black_box;
use std::time::Instant;

use lamina_compaction::partition::image::lambda;
use lamina_compaction::partition::StreamHist;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Bytes of a histogram in the properties block (docs/format.md).
fn stored_bytes(h: &StreamHist) -> usize {
    let varint = |v: u64| (64 - v.max(1).leading_zeros() as usize).div_ceil(7).max(1);
    1 + varint(h.bins().len() as u64) + h.bins().iter().map(|b| 8 + varint(b.count)).sum::<usize>()
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let mut rng = StdRng::seed_from_u64(1);
    let n: usize = if quick { 100_000 } else { 1_000_000 };

    let mut keys: Vec<u64> = (0..n).map(|_| rng.gen()).collect();
    let t = Instant::now();
    let mut shuffled = StreamHist::default();
    for &k in &keys {
        shuffled.insert(k);
    }
    let ns_random = t.elapsed().as_nanos() as f64 / n as f64;
    keys.sort_unstable();
    let t = Instant::now();
    let mut sorted = StreamHist::default();
    for &k in &keys {
        sorted.insert(k);
    }
    let ns_sorted = t.elapsed().as_nanos() as f64 / n as f64;
    let mut worst: f64 = 0.0;
    for i in 0..100u64 {
        let lo = i * (u64::MAX / 100);
        let hi = lo + u64::MAX / 100 - 1;
        let exact = keys.partition_point(|&k| k <= hi) - keys.partition_point(|&k| k < lo);
        worst = worst.max((sorted.count_in(lo, hi) - exact as f64).abs() / exact.max(1) as f64);
    }
    println!("StreamHist, 128 bins, {n} uniform u64 keys:");
    println!(
        "  insert: {ns_sorted:.0} ns in key order, {ns_random:.0} ns shuffled   (seed: <= 300 ns unweighted)"
    );
    println!(
        "  stored: {} bytes per table   (seed: about 2 kB)",
        stored_bytes(&sorted)
    );
    println!(
        "  worst error of a 1% range vs its exact count: {:.1}%",
        worst * 100.0
    );

    let strings: Vec<Vec<u8>> = (0..10_000)
        .map(|_| (0..128).map(|_| rng.gen::<u8>()).collect())
        .collect();
    let reps = if quick { 10 } else { 100 };
    let t = Instant::now();
    for _ in 0..reps {
        for s in &strings {
            black_box(lambda(black_box(s)));
        }
    }
    let ns = t.elapsed().as_nanos() as f64 / (reps * strings.len()) as f64;
    println!(
        "lambda image: {ns:.1} ns per 128-byte string, {:.2} ns per byte   (seed: < 90 ns, 0.63 ns per byte; lamina reads at most 16 bytes)",
        ns / 128.0
    );

    // Table 5.1.
    let m: usize = if quick { 20_000 } else { 100_000 };
    println!(
        "Table 5.1, collision rate (1 - distinct images / distinct strings), {m} strings per cell:"
    );
    println!("  l \\ p    1        2        3        4        5        6        7");
    for extra in 1..=7usize {
        let mut line = format!("  p+{extra}  ");
        for p in 1..=7usize {
            let prefix: Vec<u8> = (0..p).map(|_| rng.gen()).collect();
            let possible = 256f64.powi(extra as i32);
            let want = (m as f64).min(possible) as usize;
            let mut seen = HashSet::with_capacity(want);
            let mut images = HashSet::with_capacity(want);
            while seen.len() < want {
                let mut s = prefix.clone();
                s.extend((0..extra).map(|_| rng.gen::<u8>()));
                if seen.insert(s.clone()) {
                    images.insert(lambda(&s));
                }
            }
            let rate = 1.0 - images.len() as f64 / seen.len() as f64;
            line.push_str(&format!(" {rate:<8.3}"));
        }
        println!("{line}");
    }
}
