//! The fence-pointer search of a seek or point read: which data block of a
//! table can hold the target (`Table::find_block`, a search of the decoded
//! index), for the default 16 MiB table (4,096 blocks of 4 KiB) and a
//! 256 MiB one (65,536 blocks), whose index outgrows the CPU caches.

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
use lamina::microbench::{seek_key, Fences};
use rand::Rng;

/// Entries of a 4 KiB block of 16-byte keys and 100-byte values.
const ENTRIES_PER_BLOCK: u64 = 32;
const TARGETS: usize = 4096;

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("fence_search");
    for blocks in [4096u64, 65_536] {
        // Block b holds the even keys 2 * [32b, 32b + 31]; odd keys are absent.
        let bounds: Vec<(Vec<u8>, Vec<u8>)> = (0..blocks)
            .map(|b| {
                let first = b * ENTRIES_PER_BLOCK;
                (
                    db_bench_key(2 * first),
                    db_bench_key(2 * (first + ENTRIES_PER_BLOCK - 1)),
                )
            })
            .collect();
        let pairs: Vec<(&[u8], &[u8])> = bounds
            .iter()
            .map(|(f, l)| (f.as_slice(), l.as_slice()))
            .collect();
        let fences = Fences::build(&pairs).expect("increasing keys");
        assert_eq!(fences.len(), blocks as usize);

        // Any key of the table's range, present or not.
        let mut rng = rng();
        let keys: Vec<Vec<u8>> = (0..TARGETS)
            .map(|_| db_bench_key(rng.gen_range(0..2 * blocks * ENTRIES_PER_BLOCK)))
            .collect();
        // The oracle: the first block whose last key is >= the target, by a
        // binary search over the bounds the index was built from.
        for key in &keys {
            let want = bounds.partition_point(|(_, last)| last < key);
            assert_eq!(fences.find(&seek_key(key)), want, "wrong block for a key");
        }
        let past_end = db_bench_key(2 * blocks * ENTRIES_PER_BLOCK);
        assert_eq!(fences.find(&seek_key(&past_end)), blocks as usize);

        let targets: Vec<Vec<u8>> = keys.iter().map(|k| seek_key(k)).collect();
        group.bench_function(BenchmarkId::from_parameter(blocks), |b| {
            let mut cycle = Cycle::new(&targets);
            b.iter(|| fences.find(black_box(cycle.pick())))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
