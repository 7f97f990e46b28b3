//! A Bloom filter probe (one xxh3 hash, k probes by double hashing) of a
//! table's filter over 1M keys: present keys (all k probes), absent keys
//! (stops at the first clear bit) at 10 bits per key, and absent keys at the
//! bits per key Monkey gives each level of a four-level tree of size ratio
//! 10 averaging 10 bits per key.

// Setup that fails is a bug in the bench: stop there, saying what broke.
#![expect(
    clippy::expect_used,
    missing_docs,
    reason = "a benchmark may panic on a failed setup; `criterion_main!` writes an undocumented `main`"
)]

mod common;

use std::hint::black_box;

use common::{db_bench_key, rng, Cycle};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use lamina::microbench::{monkey_bits_per_key, Bloom};
use rand::Rng;

const KEYS: u64 = 1 << 20;
const TARGETS: usize = 4096;
/// Absent keys probed to check the false-positive rate before timing.
const FPR_SAMPLE: u64 = 200_000;

/// Present keys are the even integers' keys, absent ones the odd ones'.
fn filter(bits_per_key: f64) -> Bloom {
    let keys: Vec<Vec<u8>> = (0..KEYS).map(|i| db_bench_key(2 * i)).collect();
    let bloom = Bloom::build(&keys, bits_per_key).expect("filter");
    // No false negatives, and about the textbook false-positive rate (an
    // absent-key probe that passed too often would time the present path).
    assert!(
        keys.iter().all(|k| bloom.may_contain(k)),
        "a false negative"
    );
    let false_positives = (0..FPR_SAMPLE)
        .filter(|i| bloom.may_contain(&db_bench_key(2 * i + 1)))
        .count();
    let fpr = false_positives as f64 / FPR_SAMPLE as f64;
    let theory = bloom.fpr_theoretical();
    assert!(
        fpr <= 1.5 * theory + 5e-4,
        "false-positive rate {fpr} at {bits_per_key} bits/key, theory {theory}"
    );
    eprintln!("bloom_probe: {bits_per_key:.2} bits/key: FPR {fpr:.5} (theory {theory:.5})");
    bloom
}

fn targets(odd: u64) -> Vec<Vec<u8>> {
    let mut rng = rng();
    (0..TARGETS)
        .map(|_| db_bench_key(2 * rng.gen_range(0..KEYS) + odd))
        .collect()
}

fn bench(c: &mut Criterion) {
    let (present, absent) = (targets(0), targets(1));
    let mut group = c.benchmark_group("bloom_probe");
    let ten = filter(10.0);
    for (name, keys) in [("present", &present), ("absent", &absent)] {
        group.bench_function(name, |b| {
            let mut cycle = Cycle::new(keys);
            b.iter(|| ten.may_contain(black_box(cycle.pick())))
        });
    }
    // Levels of 1, 10, 100 and 1000 units at an average of 10 bits per key.
    let levels = [1e6, 1e7, 1e8, 1e9];
    let bits = monkey_bits_per_key(10.0, &levels);
    let spent: f64 = bits.iter().zip(&levels).map(|(b, n)| b * n).sum();
    let budget = 10.0 * levels.iter().sum::<f64>();
    assert!(
        (spent - budget).abs() <= 1e-6 * budget,
        "Monkey spent {spent} of {budget}"
    );
    for (level, bits) in bits.iter().enumerate() {
        let bloom = filter(*bits);
        group.bench_function(
            BenchmarkId::new("monkey_absent", format!("L{}_{bits:.1}bpk", level + 1)),
            |b| {
                let mut cycle = Cycle::new(&absent);
                b.iter(|| bloom.may_contain(black_box(cycle.pick())))
            },
        );
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
