//! The merging iterator's step (`next`, the step of a scan) over k = 2, 8
//! and 32 sorted children (100,000 entries dealt at random among them; the
//! children are in-memory cursors, so the time is the merge's own: moving
//! the current child and picking the smallest head by the cached 8-byte key
//! prefixes). The engine's iterators have one step: `key()` and `value()`
//! borrow, so there is no separate `next_ref`. A merged seek is not timed
//! here: its cost is the children's own seeks (in the engine, block and
//! fence searches, benched on their own).

// Setup that fails is a bug in the bench: stop there, saying what broke.
#![expect(
    clippy::expect_used,
    missing_docs,
    reason = "a benchmark may panic on a failed setup; `criterion_main!` writes an undocumented `main`"
)]

mod common;

use std::collections::BTreeSet;
use std::hint::black_box;

use common::{db_bench_key, rng, value_for};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use lamina::microbench::Merge;
use rand::Rng;

const ENTRIES: u64 = 100_000;

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
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
