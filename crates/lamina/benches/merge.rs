//! The merging iterator's step over k = 2, 8 and 32 sorted children
//! (100,000 entries dealt at random among them; the children are in-memory
//! cursors, so the time is the merge's own: picking the smallest head by
//! the cached 8-byte key prefixes). `next` is the step of a scan; `seek` of
//! a seek (every child seeks, then the smallest is picked). The engine's
//! iterators have one step: `key()` and `value()` borrow, so there is no
//! separate `next_ref`.

// Setup that fails is a bug in the bench: stop there, saying what broke.
#![allow(clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::hint::black_box;

use common::{db_bench_key, rng, value_for, Cycle};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use lamina::microbench::{seek_key, Merge};
use rand::Rng;

const ENTRIES: u64 = 100_000;
const TARGETS: usize = 4096;

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("merge");
    for k in [2usize, 8, 32] {
        let mut rng = rng();
        let mut children = vec![Vec::new(); k];
        let mut all = BTreeSet::new();
        // Keys 0, 2, 4, ... ascending, each to a random child, so every
        // child stays sorted.
        for i in 0..ENTRIES {
            let key = db_bench_key(2 * i);
            all.insert(key.clone());
            let value = value_for(&key);
            children[rng.gen_range(0..k)].push((key, value));
        }
        let mut merge = Merge::new(children).expect("sorted children");

        // The oracle: a full walk yields the sorted union, each with its value.
        merge.seek_to_first().expect("seek");
        let mut walked = Vec::new();
        while merge.valid() {
            assert_eq!(merge.value(), value_for(merge.user_key()).as_slice());
            walked.push(merge.user_key().to_vec());
            merge.advance().expect("next");
        }
        assert!(
            walked.iter().eq(all.iter()),
            "merge is not the sorted union"
        );

        // Seek targets: any key in range; the oracle is the set's successor.
        let keys: Vec<Vec<u8>> = (0..TARGETS)
            .map(|_| db_bench_key(rng.gen_range(0..2 * ENTRIES - 1)))
            .collect();
        for key in &keys {
            merge.seek(&seek_key(key)).expect("seek");
            assert_eq!(
                Some(merge.user_key()),
                all.range(key.clone()..).next().map(Vec::as_slice)
            );
        }
        let targets: Vec<Vec<u8>> = keys.iter().map(|k| seek_key(k)).collect();

        merge.seek_to_first().expect("seek");
        group.bench_function(BenchmarkId::new("next", k), |b| {
            b.iter(|| {
                if !merge.valid() {
                    merge.seek_to_first().expect("seek");
                }
                merge.advance().expect("next");
                black_box(merge.user_key().len())
            })
        });
        group.bench_function(BenchmarkId::new("seek", k), |b| {
            let mut cycle = Cycle::new(&targets);
            b.iter(|| {
                merge.seek(black_box(cycle.pick())).expect("seek");
                black_box(merge.user_key().len())
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
